"""What every tpu-inference family writes alike, written once: its kernel modules (loaded
where tpu-inference is installed), its ``Family`` record (the release in the summary, what
to install, one forward kernel), its mutant catalog's edits and its export's loader.

The kernels are loaded through :mod:`~kernel_harness.families.tpu_inference_loader` (no
vLLM), which the exported scripts embed verbatim.
"""

from __future__ import annotations

import textwrap
import types
from collections.abc import Callable
from typing import Any

from kernel_harness.families import tpu_inference_loader as loader
from kernel_harness.families.tpu_inference_loader import INSTALL, TESTED_VERSION
from kernel_harness.spec.adapter import TPU_BACKENDS, Adapter
from kernel_harness.spec.export import module_source
from kernel_harness.spec.family import Family
from kernel_harness.spec.kernels import KernelExpectation
from kernel_harness.spec.mutant import Mutant, edits_of

#: What a family needs installed, as ``Family.requires`` says it.
REQUIRES = f"tpu-inference: {INSTALL}"


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


def tpu_inference_family(*, summary: str, adapter: Adapter, needs: str = "tpu-inference",
                         requires: str = REQUIRES, capabilities: frozenset[str] = frozenset(),
                         **fields: Any) -> Family:
    """The record of a tpu-inference kernel: ``summary`` after the release tested, then
    ``needs`` (``list`` shows what is missing), what to install, the adapter's fields and
    one Pallas kernel per forward call; ``fields`` are the family's own."""
    return Family(summary=f"tpu-inference {TESTED_VERSION} {summary}; needs {needs}",
                  **adapter.fields(), kernels=KernelExpectation(forward=1),
                  requires=requires, capabilities=capabilities, **fields)


def tpu_inference_edits(module: str) -> Callable[..., Mutant]:
    """The constructor of the mutants of ``tpu_inference.kernels.<module>``
    (:func:`~kernel_harness.spec.mutant.edits_of`), with tpu-inference's packages prepared
    (:func:`~kernel_harness.families.tpu_inference_loader.prepare_packages`) so the mutated
    module is found without the package's ``__init__``."""
    loader.prepare_packages()
    return edits_of(f"tpu_inference.kernels.{module}")


def loader_source(kernel: str) -> str:
    """An exported script's ``default_import``: the loader, embedded verbatim, then
    ``kernel`` (source defining the script's ``kernel`` through ``kernel_module``)."""
    return module_source(loader) + textwrap.dedent(kernel)
