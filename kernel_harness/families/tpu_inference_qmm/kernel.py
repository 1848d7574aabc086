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
import jax.numpy as jnp

from kernel_harness.families.tpu_inference_record import KernelModules
from kernel_harness.spec.adapter import JittedTpuProgram

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
    tuned = _MODULES["tuned_block_sizes"].TunedValue(batch_block, out_block, in_block)
    return _MODULES["kernel"].quantized_matmul_kernel(x, w_q, w_scale, x_q_dtype=x_q_dtype,
                                                      tuned_value=tuned)


def _options(fields: dict[str, Any], interpreted: bool) -> dict[str, Any]:
    x_q = None if fields["x_q_dtype"] == "none" else jnp.dtype(fields["x_q_dtype"])
    return dict(x_q_dtype=x_q, batch_block=fields["batch_block"],
                out_block=fields["out_block"], in_block=fields["in_block"])


#: The kernel as one jitted program: ``out`` [n_batch, n_out].
PROGRAM = JittedTpuProgram(
    family="tpu-inference-quantized-matmul", kernel=quantized_matmul,
    operands=lambda case: ("x", "w_q", "w_scale"), options=_options, outputs=("out",),
    shapes=lambda case, inputs: [(case.n_batch, case.n_out)])
traceable = PROGRAM.traceable

#: How the family calls its kernel.
ADAPTER = PROGRAM.adapter(impl_signature=IMPL_SIGNATURE, backends=_MODULES.backends)
