"""The old name of :mod:`kernel_harness.records` (renamed because ``spec/`` read as tests).

Out-of-tree code that imports ``kernel_harness.spec`` or one of its modules
(``kernel_harness.spec.config``, ``kernel_harness.spec.family``...) keeps working: each
name is the ``kernel_harness.records`` module itself, not a copy, so classes and
registries are shared. Importing it warns once (DeprecationWarning) with the new name.
Nothing in the package imports this module.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from types import ModuleType

OLD = "kernel_harness.spec"
NEW = "kernel_harness.records"

warnings.warn(f"{OLD} is now {NEW}: import {NEW} instead (the old name is an alias)",
              DeprecationWarning, stacklevel=2)


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``kernel_harness.spec.X`` as the already-importable ``kernel_harness.records.X``."""

    def find_spec(self, fullname, path, target=None):  # noqa: ANN001, ANN201 (importlib protocol)
        if not fullname.startswith(OLD + "."):
            return None
        if importlib.util.find_spec(NEW + fullname[len(OLD):]) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec) -> ModuleType:  # noqa: ANN001 (importlib protocol)
        return importlib.import_module(NEW + spec.name[len(OLD):])

    def exec_module(self, module: ModuleType) -> None:
        """The module ran when it was imported under its new name."""


if not any(isinstance(finder, _Alias) for finder in sys.meta_path):
    sys.meta_path.append(_Alias())


def __getattr__(name: str) -> object:
    records = importlib.import_module(NEW)
    if hasattr(records, name):
        return getattr(records, name)
    try:
        return importlib.import_module(f"{NEW}.{name}")
    except ModuleNotFoundError:
        raise AttributeError(f"module {OLD!r} (now {NEW!r}) has no attribute {name!r}") from None
