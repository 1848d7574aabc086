"""Mutant catalog for tpu-inference-blockwise-quantized-matmul: bugs planted in
tpu-inference's blockwise quantized matmul source (``kernel_harness.records.mutant``;
``kernel-harness mutate``)."""

from __future__ import annotations

from kernel_harness.families.tpu_inference.mutants import tpu_inference_edits
from kernel_harness.records.mutant import CI, Mutant

_kernel = tpu_inference_edits("quantized_matmul.blockwise_kernel")
_util = tpu_inference_edits("quantized_matmul.util")

MUTANTS: list[Mutant] = [
    _kernel("earlier-tiles-dropped",
            "the accumulator of earlier in-tiles is not added (only the last tile of n_in "
            "counts)", "acc_block += acc_scratch[...]", "acc_block = acc_block", tags=CI),
    _kernel("scale-of-first-block",
            "every block of a tile is scaled by the tile's first weight scale",
            "rhs_scale_full = w_scales_ref[i, :, :].astype(acc_dtype)",
            "rhs_scale_full = w_scales_ref[0, :, :].astype(acc_dtype)", tags=CI),
    _kernel("x-scale-skipped", "the activations' block scale is never applied",
            "res = res * lhs_scale", "res = res * 1.0"),
    _kernel("last-block-of-tile-dropped", "a tile's last block of inputs is not summed",
            "for i in range(steps_k):", "for i in range(max(steps_k - 1, 1)):"),
    _kernel("w-scales-of-first-out-tile",
            "every out tile reads the weight scales of out tile 0",
            "lambda _, o, i: (i, 0, o),", "lambda _, o, i: (i, 0, 0),"),
    _util("x-saturated",
          "the activations' scale is half what it should be: x is scaled to twice the "
          "quantized range and clipped",
          "scale = abs_max / dtype_max", "scale = abs_max / (2 * dtype_max)"),
]
