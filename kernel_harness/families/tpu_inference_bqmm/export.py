"""Standalone repro source for one tpu-inference-blockwise-quantized-matmul case
(``kernel-harness export-repro``): the loader that imports tpu-inference's kernel module
without vLLM, and the op's reference (:mod:`kernel_harness.ops.quantized_matmul.export`)."""

from __future__ import annotations

from kernel_harness.families.tpu_inference import matmul
from kernel_harness.ops.quantized_matmul.cases import QmmCase
from kernel_harness.records.export import ExportSnippet


def export(case: QmmCase) -> ExportSnippet:
    """The kernel with the case's scale block and tiling (under forced TPU interpret mode
    on interpret) and the op's exact reference."""
    return matmul.export_snippet(case, "blockwise_kernel", rounding="nearest", blockwise=True)
