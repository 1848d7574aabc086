"""Adapter running tpu-inference's blockwise quantized matmul kernel
(``tpu_inference.kernels.quantized_matmul.blockwise_kernel.quantized_matmul_kernel``) with
the case's scale block and tiling (its ``tuned_value``: the package's tuned table knows TPU
chips, not the CPU).

The kernel has no ``interpret`` argument: on ``interpret`` and ``tpu-interpret`` it runs
under forced TPU interpret mode. Without tpu-inference installed the family has no backend
(``kernel-harness list`` says it needs it).
"""

from __future__ import annotations

from typing import Any

import jax

from kernel_harness.families.tpu_inference import matmul
from kernel_harness.families.tpu_inference.modules import KernelModules

IMPL_SIGNATURE = (
    "blockwise_quantized_matmul(x, w_q, w_scale, *, block_size, x_q_dtype, batch_block, "
    "out_block, in_block) -> out; x: [n_batch, n_in] float32/bfloat16, w_q: float8_e4m3fn "
    "[n_out, n_in], w_scale: float32 [n_in / block_size, 1, n_out], x_q_dtype: w_q's dtype "
    "(quantize x per row and block_size inputs) or None; out: [n_batch, n_out] in x's dtype"
)

_MODULES = KernelModules("quantized_matmul.blockwise_kernel",
                         "quantized_matmul.tuned_block_sizes")


def blockwise_quantized_matmul(x: jax.Array, w_q: jax.Array, w_scale: jax.Array, *,
                               block_size: int, x_q_dtype: Any, batch_block: int,
                               out_block: int, in_block: int) -> jax.Array:
    """The default implementation: tpu-inference's blockwise ``quantized_matmul_kernel``,
    tiled as given."""
    return matmul.tiled_call(_MODULES, "blockwise_kernel", x, w_q, w_scale,
                             block_size=block_size, x_q_dtype=x_q_dtype,
                             batch_block=batch_block, out_block=out_block, in_block=in_block)


#: The kernel as one jitted program: ``out`` [n_batch, n_out].
PROGRAM = matmul.program("tpu-inference-blockwise-quantized-matmul", blockwise_quantized_matmul,
                         blockwise=True)
traceable = PROGRAM.traceable

#: How the family calls its kernel.
ADAPTER = PROGRAM.adapter(impl_signature=IMPL_SIGNATURE, backends=_MODULES.backends)
