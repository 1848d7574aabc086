"""``kernel-harness init``'s family skeleton: the files, their text, and writing them.

:func:`plan` returns every file of a new family package for family ``NAME`` whose kernel
is ``MODULE:FUNC``; :func:`write` writes them, refusing (UsageError, before writing
anything) when any of them exists. The skeleton passes ``kernel-harness check NAME`` as
written: its reference is a placeholder for the math of the placeholder kernel that
:func:`plan` also writes at ``MODULE`` when no module of that name exists yet (a Pallas
``y = 2 * x + 1`` with a Pallas backward). With an existing kernel, the skeleton wires
it in and the check fails until the reference and the adapter are yours. Every place
to fill is marked ``# TODO(kernel-harness):``.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import keyword
import re
import string
import sys
from pathlib import Path

from kernel_harness.core.errors import UsageError
from kernel_harness.spec import scaffold_templates as templates
from kernel_harness.spec.registry import BUILTIN_FAMILIES, ENTRY_POINT_GROUP

#: The marker on every line a user must look at.
TODO = "TODO(kernel-harness):"

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


def plan(name: str, kernel: str, target: Path) -> Skeleton:
    """The skeleton of family ``name`` checking ``kernel`` (``MODULE:FUNC``) in ``target``."""
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
    files = {
        Path("pyproject.toml"): templates.PYPROJECT,
        Path(package, "__init__.py"): templates.INIT,
        Path(package, "cases.py"): templates.CASES,
        Path(package, "reference.py"): templates.REFERENCE,
        Path(package, "family.py"): templates.FAMILY,
        Path("tests", f"test_{package}.py"): templates.TEST,
    }
    placeholder = _module_missing(parts, target)
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
        files[Path(*parts[:-1], parts[-1] + ".py")] = templates.KERNEL
        for i in range(1, len(parts)):
            init = Path(*parts[:i], "__init__.py")
            if not (target / init).exists():
                files[init] = '"""Kernels."""\n'
    elif not _has_function(module, func, target):
        raise UsageError(f"init: module {module!r} exists but defines no {func!r}; name your "
                         f"kernel's function, or a new module for a placeholder kernel")
    return Skeleton(
        name=name, package=package, kernel=kernel, placeholder_kernel=placeholder,
        files={p: string.Template(t).substitute(subs) for p, t in files.items()},
        ships_kernel=local is not None, kernel_origin=origin, gitignore_append=gitignore,
    )


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


def _has_function(module: str, func: str, target: Path) -> bool:
    if str(target) not in sys.path:
        sys.path.insert(0, str(target))
    try:
        obj = importlib.import_module(module)
    except Exception as e:  # noqa: BLE001 - any import failure is the user's to see
        raise UsageError(f"init: --kernel {module}: cannot import it: "
                         f"{type(e).__name__}: {e}") from None
    return callable(getattr(obj, func, None))


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
