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
    subs["setuptools"] = _setuptools(package, parts if placeholder else None)
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
    )


def _setuptools(package: str, placeholder: list[str] | None) -> str:
    """``[tool.setuptools]`` lines: the family package, and the placeholder kernel's
    module (so an installed family imports it); a user's own kernel ships elsewhere."""
    packages = [package]
    modules = []
    if placeholder is not None:
        packages += [".".join(placeholder[:i]) for i in range(1, len(placeholder))]
        if len(placeholder) == 1:
            modules.append(placeholder[0])
    lines = [f"packages = {_toml_list(packages)}"]
    if modules:
        lines.append(f"py-modules = {_toml_list(modules)}")
    return "\n".join(lines)


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
    when one of them exists."""
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
    return written
