"""What an architecture test reads of a family folder: each module's restatements of its
op, by a test's own ``violations(source) -> [finding]`` (the attention and ragged families'
architecture tests)."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

#: kernel_harness/families, the folders the architecture tests read.
FAMILIES = Path(__file__).resolve().parents[2] / "kernel_harness" / "families"


def restatements(family: str, violations: Callable[[str], list[str]]
                 ) -> dict[str, list[str]]:
    """``{module name: findings}`` for the modules of ``FAMILIES / family`` with any (the
    folder must hold modules)."""
    modules = sorted((FAMILIES / family).glob("*.py"))
    assert modules, f"no modules in {FAMILIES / family}"
    return {m.name: v for m in modules if (v := violations(m.read_text()))}


def declared_fields(node: ast.ClassDef, names: frozenset[str]) -> list[str]:
    """The annotated class attributes of ``node`` among ``names``, in order."""
    return [item.target.id for item in node.body
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
            and item.target.id in names]


def defined(tree: ast.AST, names: frozenset[str]) -> list[str]:
    """``defines NAME()`` for each function or method in ``tree`` named in ``names``."""
    return [f"defines {node.name}()" for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in names]


def classes(tree: ast.AST) -> list[ast.ClassDef]:
    """Every class ``tree`` defines, nested ones too."""
    return [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
