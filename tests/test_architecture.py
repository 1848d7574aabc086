"""The package's floors stay as the README draws them.

import-linter (``lint-imports``, configured in pyproject.toml) checks the layers in
.ci/run; here: it really fails on an upward import, and the rules it does not
cover: no import cycle (imports inside functions count), no module past ~400
lines, no import of another module's private (``_name``) helpers.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "kernel_harness"
MAX_LINES = 400


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imports(path: Path, name: str, modules: dict[str, Path]) -> list[tuple[str, str | None]]:
    """(module imported, name imported from it or None) for every import in the file,
    those inside functions included; ``from pkg import sub`` counts as importing ``sub``."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for a in node.names:
                sub = f"{base}.{a.name}"
                found.append((sub, None) if sub in modules else (base, a.name))
    return [(m, n) for m, n in found if m.split(".")[0] == "kernel_harness"]


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        for target, _ in _imports(path, name, modules):
            if target in modules and target != name:
                graph[name].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    assert _cycles(_graph()) == []


def test_cycle_finder_sees_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_modules_fit_in_one_sitting():
    long = {name: n for name, path in _modules().items()
            if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def _private_attributes(path: Path, modules: dict[str, Path]) -> list[str]:
    """``alias._name`` uses in the file where ``alias`` is a harness module it imported
    (``from kernel_harness.x import y as alias``, ``import kernel_harness.x as alias``)."""
    tree = ast.parse(path.read_text())
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kernel_harness"):
            aliases |= {a.asname or a.name: f"{node.module}.{a.name}" for a in node.names
                        if f"{node.module}.{a.name}" in modules}
        elif isinstance(node, ast.Import):
            aliases |= {a.asname: a.name for a in node.names if a.asname and a.name in modules}
    return [f"{aliases[n.value.id]}.{n.attr}" for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
            and n.value.id in aliases and n.attr.startswith("_") and not n.attr.startswith("__")]


def test_no_module_imports_another_modules_private_names():
    modules = _modules()
    bad = []
    for name, path in modules.items():
        for target, imported in _imports(path, name, modules):
            if imported and imported.startswith("_") and target != name:
                bad.append(f"{name} imports {target}.{imported}")
        bad += [f"{name} uses {used}" for used in _private_attributes(path, modules)]
    assert bad == []


def test_a_private_name_reached_through_a_module_alias_is_seen(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("from kernel_harness.families.flash import kernel as _kernel\n"
                    "f = _kernel._program\n")
    modules = {"kernel_harness.families.flash.kernel": path}
    assert _private_attributes(path, modules) == ["kernel_harness.families.flash.kernel._program"]


def test_the_cli_is_a_leaf():
    importers = [m for m, deps in _graph().items()
                 if any(d == "kernel_harness.cli" or d.startswith("kernel_harness.cli.")
                        for d in deps) and not m.startswith("kernel_harness.cli")]
    assert importers == []


def _lint_imports(root: Path) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("lint-imports")
    return subprocess.run(
        [str(exe), "--config", str(root / "pyproject.toml")], cwd=root, capture_output=True,
        text=True, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"}, timeout=300,
    )


@pytest.fixture(scope="module")
def package_copy(tmp_path_factory):
    root = tmp_path_factory.mktemp("arch")
    shutil.copytree(PACKAGE, root / "kernel_harness",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    return root


def test_linter_passes_on_the_package(package_copy):
    result = _lint_imports(package_copy)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_linter_fails_on_an_upward_import(package_copy, tmp_path):
    root = tmp_path / "upward"
    shutil.copytree(package_copy, root)
    case = root / "kernel_harness" / "core" / "case.py"
    case.write_text(case.read_text() + "\n\ndef _leak():\n"
                    "    from kernel_harness.run import runner  # an upward import\n\n"
                    "    return runner\n")
    result = _lint_imports(root)
    assert result.returncode != 0
    assert "BROKEN" in result.stdout and "kernel_harness.core.case" in result.stdout
