"""Adapter running tpu-inference's quantized matmul kernel
(``tpu_inference.kernels.quantized_matmul.kernel.quantized_matmul_kernel``) with the case's
own tiling (its ``tuned_value``: the package's tuned table knows TPU chips, not the CPU).

The kernel has no ``interpret`` argument: on ``interpret`` and ``tpu-interpret`` it runs
under forced TPU interpret mode (plain settings on ``interpret``; NaN-filled memory and race
detection on ``tpu-interpret``). Without tpu-inference installed the family has no backend
(``kernel-harness list`` says it needs it).
"""

from __future__ import annotations

from typing import Any

import jax

from kernel_harness.families.tpu_inference import matmul
from kernel_harness.families.tpu_inference.modules import KernelModules

IMPL_SIGNATURE = (
    "quantized_matmul(x, w_q, w_scale, *, x_q_dtype, batch_block, out_block, in_block) -> "
    "out; x: [n_batch, n_in] float32/bfloat16, w_q: int8 or float8_e4m3fn [n_out, n_in], "
    "w_scale: float32 [n_out], x_q_dtype: w_q's dtype (quantize each row of x) or None; "
    "out: [n_batch, n_out] in x's dtype"
)

_MODULES = KernelModules("quantized_matmul.kernel", "quantized_matmul.tuned_block_sizes")


def quantized_matmul(x: jax.Array, w_q: jax.Array, w_scale: jax.Array, *, x_q_dtype: Any,
                     batch_block: int, out_block: int, in_block: int) -> jax.Array:
    """The default implementation: tpu-inference's ``quantized_matmul_kernel``, tiled as
    given."""
    return matmul.tiled_call(_MODULES, "kernel", x, w_q, w_scale, x_q_dtype=x_q_dtype,
                             batch_block=batch_block, out_block=out_block, in_block=in_block)


#: The kernel as one jitted program: ``out`` [n_batch, n_out].
PROGRAM = matmul.program("tpu-inference-quantized-matmul", quantized_matmul, blockwise=False)
traceable = PROGRAM.traceable

#: How the family calls its kernel.
ADAPTER = PROGRAM.adapter(impl_signature=IMPL_SIGNATURE, backends=_MODULES.backends)
