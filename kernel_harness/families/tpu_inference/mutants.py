"""The edits of a tpu-inference kernel module's mutant catalog."""

from __future__ import annotations

from collections.abc import Callable

from kernel_harness.families.tpu_inference import loader
from kernel_harness.records.mutant import Mutant, edits_of


def tpu_inference_edits(module: str) -> Callable[..., Mutant]:
    """The constructor of the mutants of ``tpu_inference.kernels.<module>``
    (:func:`~kernel_harness.records.mutant.edits_of`), with tpu-inference's packages prepared
    (:func:`~kernel_harness.families.tpu_inference.loader.prepare_packages`) so the mutated
    module is found without the package's ``__init__``."""
    loader.prepare_packages()
    return edits_of(f"tpu_inference.kernels.{module}")
