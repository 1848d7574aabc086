"""What installing kernel-harness brings into a user's environment: pytest-xdist and
pytest-timeout only with the ``dev`` extra, and no module of the package imports them."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
OPTIONAL_PLUGINS = ("pytest-xdist", "pytest-timeout")


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0].lower() for r in requirements}


def test_xdist_and_timeout_are_dev_extras_not_dependencies():
    assert not _names(PROJECT["dependencies"]) & set(OPTIONAL_PLUGINS)
    assert set(OPTIONAL_PLUGINS) <= _names(PROJECT["optional-dependencies"]["dev"])


def test_no_module_of_the_package_imports_xdist_or_pytest_timeout():
    found = []
    for path in sorted((REPO / "kernel_harness").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                mods = [node.module or ""]
            else:
                continue
            found += [f"{path.relative_to(REPO)}: {m}" for m in mods
                      if m.split(".")[0] in ("xdist", "pytest_timeout")]
    assert not found
