"""Mutant catalog for tpu-inference-quantized-matmul: bugs planted in tpu-inference's
quantized matmul source (``kernel_harness.records.mutant``; ``kernel-harness mutate``)."""

from __future__ import annotations

from kernel_harness.families.tpu_inference.mutants import tpu_inference_edits
from kernel_harness.records.mutant import CI, Mutant

_kernel = tpu_inference_edits("quantized_matmul.kernel")
_util = tpu_inference_edits("quantized_matmul.util")

MUTANTS: list[Mutant] = [
    _util("rounds-to-nearest",
          "the activations are rounded to nearest instead of truncated (what the package's "
          "own test reference does; here a change of contract the judge must see)",
          "return (x * scale_inv).astype(quant_dtype)",
          "return jnp.round(x * scale_inv).astype(quant_dtype)", tags=CI),
    _kernel("accumulator-dropped",
            "the int32 accumulator of earlier in-blocks is not added (only the last block "
            "of n_in counts)", "acc += acc_scratch[...]", "acc = acc", tags=CI),
    _kernel("x-scale-skipped", "the row scale of the quantized activations is never applied",
            "acc *= x_scale_tmp", "acc *= 1.0"),
    _kernel("w-scale-skipped", "the weights' channel scale is never applied",
            "acc *= w_scale_ref[...]", "acc *= 1.0"),
    _util("scale-off-by-one", "the activations are scaled to +-126 while the row scale "
          "assumes 127", "scale = jnp.transpose(x_abs_max / dtype_max)",
          "scale = jnp.transpose(x_abs_max / (dtype_max + 1))"),
    _util("first-row-scale-for-all",
          "every row of a batch block is quantized and rescaled with the first row's scale",
          "scale = jnp.transpose(x_abs_max / dtype_max)",
          "scale = jnp.transpose(x_abs_max[:, :1] / dtype_max)"),
    _kernel("quantized-x-cached-at-wrong-block",
            "with x quantized once per batch block, it is quantized at out-block 1 instead of "
            "0 (out-block 0 reads a scratch nothing wrote)",
            "quant = out_idx == 0", "quant = out_idx == 1"),
]
