"""``kernel-harness init``'s family skeleton: the files, their text, and writing them.

:func:`plan` returns every file of a new family package for family ``NAME`` whose kernel
is ``MODULE:FUNC``, of one kind of op (:data:`OPS`); :func:`write` writes them, refusing
(UsageError, before writing anything) when any of them exists. The skeleton passes
``kernel-harness check NAME`` as written with the placeholder kernel that :func:`plan`
also writes at ``MODULE`` when no module of that name exists yet: for ``rowwise`` a
Pallas ``y = 2 * x + 1`` with a Pallas backward (and a reference of that math), for
``delta-rule`` a chunked Pallas forward of the built-in delta-rule op (whose reference,
cases and relations the family takes from the op). With an existing kernel, the skeleton
wires it in and the check fails until the reference (rowwise) and the adapter are yours;
a kernel whose signature has no ``interpret`` is called without it. Every place to fill
is marked ``# TODO(kernel-harness):``.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import keyword
import re
import string
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernel_harness.core.errors import UsageError
from kernel_harness.records import scaffold_delta_rule as delta_rule
from kernel_harness.records import scaffold_templates as templates
from kernel_harness.records.registry import BUILTIN_FAMILIES, ENTRY_POINT_GROUP

#: The marker on every line a user must look at.
TODO = "TODO(kernel-harness):"

#: The kinds of op ``init --op`` scaffolds, each with what its skeleton is.
OPS: dict[str, str] = {
    "rowwise": "a row-wise op: your cases, reference and adapter (placeholder y = 2 * x + 1)",
    "delta-rule": "a chunked delta-rule recurrence (state across chunks, reset at documents) "
    "on the built-in op: its cases, reference and relations",
}

_NAME = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Skeleton:
    """What ``init`` writes: ``files`` (path relative to the target folder -> text), and
    whether the kernel module is the placeholder it wrote (else the user's existing one)."""

    name: str
    package: str
    kernel: str
    files: dict[Path, str]
    placeholder_kernel: bool
    #: Whether the kernel's top-level module is in the target folder, so the family's
    #: distribution ships it (else it must come from a dependency: ``kernel_origin``).
    ships_kernel: bool = True
    kernel_origin: str | None = None
    #: Lines appended to an existing ``.gitignore`` (a new one is in ``files``).
    gitignore_append: tuple[str, ...] = ()


def _identifier_path(dotted: str, what: str) -> list[str]:
    parts = dotted.split(".")
    if not all(p.isidentifier() and not keyword.iskeyword(p) for p in parts):
        raise UsageError(f"init: {what} {dotted!r} is not a dotted Python name")
    return parts


def plan(name: str, kernel: str, target: Path, op: str = "rowwise") -> Skeleton:
    """The skeleton of family ``name`` checking ``kernel`` (``MODULE:FUNC``), a kernel of
    the kind ``op`` (:data:`OPS`), in ``target``."""
    if op not in OPS:
        raise UsageError(f"init: unknown --op {op!r}; the kinds: {', '.join(OPS)}")
    if not _NAME.fullmatch(name):
        raise UsageError(f"init: family name {name!r} must be lowercase letters, digits and "
                         "single hyphens, starting with a letter (e.g. my-softmax)")
    if name in BUILTIN_FAMILIES:
        raise UsageError(f"init: {name!r} is a built-in family's name; choose another")
    module, sep, func = kernel.partition(":")
    if not sep or not module or not func:
        raise UsageError(f"init: --kernel must look like MODULE:FUNC, got {kernel!r}")
    parts = _identifier_path(module, "module")
    if not func.isidentifier() or keyword.iskeyword(func):
        raise UsageError(f"init: --kernel {kernel}: FUNC must be a function name in MODULE")
    package = name.replace("-", "_") + "_family"
    if parts[0] == package:
        raise UsageError(f"init: the kernel module {module!r} cannot live in the generated "
                         f"package {package!r}")
    subs = {"name": name, "package": package, "module": module, "func": func,
            "camel": "".join(p.capitalize() for p in name.split("-")), "todo": TODO,
            "group": ENTRY_POINT_GROUP, "kernel": kernel}
    placeholder = _module_missing(parts, target)
    function = None if placeholder else _function(module, func, target)
    if not placeholder and function is None:
        raise UsageError(f"init: module {module!r} exists but defines no {func!r}; name your "
                         f"kernel's function, or a new module for a placeholder kernel")
    files = _op_files(op, package, placeholder, _takes_interpret(function), subs)
    local = _local_top(parts, target, placeholder)
    origin = None if local is not None else _origin(parts[0])
    subs["setuptools"] = _setuptools(package, local)
    subs["dependency_note"] = (
        f"# {parts[0]}, the kernel's module, ships in this distribution ([tool.setuptools] "
        "below)." if local else
        f"# {TODO} add the distribution that provides {parts[0]} (imported from {origin}, "
        "not this folder):\n# installed without it, the family does not import.")
    gitignore = _gitignore_missing(target)
    if not (target / ".gitignore").exists():
        files[Path(".gitignore")] = templates.GITIGNORE
        gitignore = ()
    if placeholder:
        files[Path(*parts[:-1], parts[-1] + ".py")] = (
            templates.KERNEL if op == "rowwise" else delta_rule.KERNEL)
        for i in range(1, len(parts)):
            init = Path(*parts[:i], "__init__.py")
            if not (target / init).exists():
                files[init] = '"""Kernels."""\n'
    return Skeleton(
        name=name, package=package, kernel=kernel, placeholder_kernel=placeholder,
        files={p: string.Template(t).substitute(subs) for p, t in files.items()},
        ships_kernel=local is not None, kernel_origin=origin, gitignore_append=gitignore,
    )


def _op_files(op: str, package: str, placeholder: bool, interpret: bool,
              subs: dict[str, str]) -> dict[Path, str]:
    """The family's files of the kind ``op`` (the kernel's module aside), with the
    substitutions saying how the kernel is called added to ``subs``."""
    test = Path("tests", f"test_{package}.py")
    if op == "rowwise":
        _add(subs, templates.INTERPRET if interpret else templates.NO_INTERPRET)
        return {Path("pyproject.toml"): templates.PYPROJECT,
                Path(package, "__init__.py"): templates.INIT,
                Path(package, "cases.py"): templates.CASES,
                Path(package, "reference.py"): templates.REFERENCE,
                Path(package, "family.py"): templates.FAMILY, test: templates.TEST}
    _add(subs, {"interpret_arg": delta_rule.INTERPRET_ARG if interpret else "",
                "interpret_sig": ", interpret" if interpret else "",
                "run": delta_rule.RUN if interpret else delta_rule.FORCED_RUN,
                "kernel_note": delta_rule.PLACEHOLDER_NOTE if placeholder
                else delta_rule.EXISTING_NOTE})
    return {Path("pyproject.toml"): templates.PYPROJECT,
            Path(package, "__init__.py"): delta_rule.INIT,
            Path(package, "family.py"): delta_rule.FAMILY, test: delta_rule.TEST}


def _add(subs: dict[str, str], more: dict[str, str]) -> None:
    """``more`` into ``subs``, its own ``$todo``, ``$kernel``... substituted first."""
    subs.update({k: string.Template(v).substitute(subs) for k, v in more.items()})


def _takes_interpret(function: Callable[..., Any] | None) -> bool:
    """Whether ``function`` (None: the placeholder, which does) takes ``interpret=``; a
    signature Python cannot read (a builtin) is assumed to."""
    if function is None:
        return True
    try:
        params = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.name == "interpret" or p.kind is p.VAR_KEYWORD for p in params)


def _local_top(parts: list[str], target: Path, placeholder: bool) -> tuple[str, bool] | None:
    """``(top-level name, is a package)`` of the kernel's module when it lives (or the
    placeholder will live) in ``target``, so the family's distribution ships it; None when
    it is imported from elsewhere (an installed package)."""
    if placeholder:
        return parts[0], len(parts) > 1
    if (target / parts[0]).is_dir():
        return parts[0], True
    if (target / f"{parts[0]}.py").is_file():
        return parts[0], False
    return None


def _origin(top: str) -> str:
    """Where the module ``top`` is imported from, for the dependency note."""
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        spec = None
    where = None if spec is None else spec.origin or next(
        iter(spec.submodule_search_locations or []), None)
    return str(Path(where).parent if where and where.endswith("__init__.py") else where)


def _setuptools(package: str, local: tuple[str, bool] | None) -> str:
    """``[tool.setuptools]`` tables: the family package (and subpackages), and the
    kernel's module when it is in this folder (so the installed family imports it from
    the same distribution); a kernel imported from elsewhere ships elsewhere."""
    include = [package, f"{package}.*"]
    modules = []
    if local is not None and local[1]:
        include += [local[0], f"{local[0]}.*"]
    elif local is not None:
        modules.append(local[0])
    lines = ["[tool.setuptools]", f"py-modules = {_toml_list(modules)}", ""] if modules else []
    lines += ["[tool.setuptools.packages.find]", f"include = {_toml_list(include)}"]
    return "\n".join(lines)


def _gitignore_missing(target: Path) -> tuple[str, ...]:
    """The lines of :data:`~.scaffold_templates.GITIGNORE` that ``target``'s existing
    ``.gitignore`` lacks (all of them when there is none)."""
    path = target / ".gitignore"
    have = set(path.read_text().splitlines()) if path.is_file() else set()
    return tuple(line for line in templates.GITIGNORE.splitlines()
                 if line and not line.startswith("#") and line not in have)


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join(f'"{i}"' for i in items) + "]"


def _module_missing(parts: list[str], target: Path) -> bool:
    """No module of that name anywhere: neither under ``target`` nor importable."""
    if (target / Path(*parts[:-1], parts[-1] + ".py")).exists() or (
            target / Path(*parts, "__init__.py")).exists():
        return False
    if (target / parts[0]).exists():
        return True  # a package of ours under target that lacks the module: write it there
    try:
        return importlib.util.find_spec(parts[0]) is None
    except (ImportError, ValueError):
        return True


def _function(module: str, func: str, target: Path) -> Callable[..., Any] | None:
    """``module.func`` imported from ``target`` (or installed); None when not callable."""
    if str(target) not in sys.path:
        sys.path.insert(0, str(target))
    try:
        obj = importlib.import_module(module)
    except Exception as e:  # noqa: BLE001 - any import failure is the user's to see
        raise UsageError(f"init: --kernel {module}: cannot import it: "
                         f"{type(e).__name__}: {e}") from None
    found = getattr(obj, func, None)
    return found if callable(found) else None


def write(skeleton: Skeleton, target: Path) -> list[Path]:
    """Writes every file under ``target``; refuses (UsageError) before writing anything
    when one of them exists. An existing ``.gitignore`` is only appended the lines it
    lacks (``gitignore_append``)."""
    existing = sorted(str(p) for p in skeleton.files if (target / p).exists())
    if existing:
        raise UsageError(f"init: not overwriting existing file(s) in {target}: "
                         f"{', '.join(existing)}")
    written = []
    for rel, text in skeleton.files.items():
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    if skeleton.gitignore_append:
        path = target / ".gitignore"
        text = path.read_text()
        path.write_text(text + ("" if text.endswith("\n") or not text else "\n")
                        + "# kernel-harness init\n" + "\n".join(skeleton.gitignore_append)
                        + "\n")
        written.append(path)
    return written
