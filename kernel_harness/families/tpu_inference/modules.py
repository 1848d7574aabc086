"""A tpu-inference family's kernel modules, loaded where tpu-inference is installed
(through :mod:`.loader`, no vLLM), and the same loader as an exported script's import."""

from __future__ import annotations

import textwrap
import types

from kernel_harness.families.tpu_inference import loader
from kernel_harness.families.tpu_inference.loader import INSTALL
from kernel_harness.records.adapter import TPU_BACKENDS
from kernel_harness.records.export import module_source


class KernelModules(dict[str, types.ModuleType]):
    """A family's tpu-inference kernel modules by their last name (``kernel``,
    ``tuned_block_sizes``), imported with the family where its packages are installed, so
    a mutated copy (``kernel-harness mutate``) is the one the family binds; where they are
    not, empty, and asking for a module is an ImportError saying what to install (a name
    not loaded where they are is a KeyError: a slip in the family, not the install)."""

    def __init__(self, *names: str, available: bool | None = None,
                 missing: str = f"tpu-inference is not installed ({INSTALL})") -> None:
        self.available = loader.available() if available is None else available
        self.missing = missing
        super().__init__({name.rpartition(".")[2]: loader.kernel_module(name)
                          for name in names} if self.available else {})

    def __missing__(self, name: str) -> types.ModuleType:
        if self.available:
            raise KeyError(f"{name!r} is not among the loaded modules {sorted(self)}")
        raise ImportError(self.missing)

    @property
    def backends(self) -> frozenset[str]:
        """The TPU backends where the modules are installed; none where not."""
        return TPU_BACKENDS if self.available else frozenset()


def loader_source(kernel: str) -> str:
    """An exported script's ``default_import``: the loader, embedded verbatim, then
    ``kernel`` (source defining the script's ``kernel`` through ``kernel_module``)."""
    return module_source(loader) + textwrap.dedent(kernel)
