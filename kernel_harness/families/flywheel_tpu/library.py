"""flywheel-tpu (TPU attention kernels in Pallas, on PyPI): the release the families were
written against, how to install it, and whether this Python has it.

The package requires Python >= 3.12 (and jax >= 0.11): on the project's Python 3.11 stack
it cannot be installed, and its families have no backend there (``kernel-harness list``
says so, with the reason). It is installed ``--no-deps`` (its only dependency is jax).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import sys
import types

#: The release the families were written and checked against.
TESTED_VERSION = "0.3.0"
INSTALL = f"pip install --no-deps flywheel-tpu=={TESTED_VERSION}"

#: ``Family.requires`` of a flywheel-tpu family: what to install, and where it can be.
REQUIRES = f"flywheel-tpu (Python >= 3.12 only): {INSTALL}"


def unavailable_reason() -> str | None:
    """Why flywheel-tpu cannot be used here (this Python is too old, or it is not
    installed), or None where it can."""
    if sys.version_info < (3, 12):
        return (f"flywheel-tpu needs Python >= 3.12, this is Python "
                f"{sys.version_info[0]}.{sys.version_info[1]}")
    if "flywheel_tpu" in sys.modules:  # imported, or blocked (None)
        return None if sys.modules["flywheel_tpu"] is not None else "flywheel-tpu is blocked"
    try:
        found = importlib.util.find_spec("flywheel_tpu") is not None
    except (ImportError, ValueError):
        found = False
    return None if found else f"flywheel-tpu is not installed ({INSTALL})"


def installed_version() -> str | None:
    """The installed flywheel-tpu version, or None."""
    try:
        return importlib.metadata.version("flywheel-tpu")
    except importlib.metadata.PackageNotFoundError:
        return None


def summary(what: str) -> str:
    """A family's summary: the release, ``what``, and where it is missing, why."""
    reason = unavailable_reason()
    return (f"flywheel-tpu {TESTED_VERSION} {what}; needs flywheel-tpu (Python >= 3.12)"
            + (f" -- {reason}: no backend" if reason else ""))


def load(module: str) -> types.ModuleType | None:
    """flywheel-tpu's ``module``, imported now where the library can be (a family's kernel
    module calls this at import, so ``kernel-harness mutate`` binds a mutated copy), else
    None."""
    return None if unavailable_reason() else importlib.import_module(module)


def required(loaded: types.ModuleType | None, module: str) -> types.ModuleType:
    """``loaded`` (from :func:`load`); where it is None, an ImportError saying why."""
    if loaded is None:
        raise ImportError(unavailable_reason() or f"{module} is not loaded")
    return loaded


def backends(supported: frozenset[str]) -> frozenset[str]:
    """A flywheel family's backends: ``supported`` where the library can be used, none
    elsewhere (``list`` then says why: :func:`summary`)."""
    return frozenset() if unavailable_reason() else supported
