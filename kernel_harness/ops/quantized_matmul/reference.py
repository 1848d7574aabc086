"""The independent reference of the quantized matmul op, in exact arithmetic, with the
quantization of the activations as declared contract options.

Per group (a row of x, or a row's scale block): with activations quantized, ``x_q, scale =``
:func:`~.quantize.quantize` ``(x, x_q_dtype, rounding)`` (exact for the op's cases, whose
scales are powers of two), where ``rounding`` is the contract's for int8 (``toward-zero``:
truncation, as ``astype(int8)``; ``nearest``: round half to even; float8 always rounds to
nearest even); then ``out = sum_g (x_q_g @ w_q_g^T) * scale_g * w_scale_g`` with the products
of quantized values summed exactly (float64 holds every such sum exactly) and the scaling in
float64. Without: ``out = sum_g (x_g @ w_q_g^T) * w_scale_g`` in float64. Returned as
float32.

:func:`bfloat16_accumulation` is the calibrated judge's twin for kernels that accumulate in
bfloat16: the same sum with each group's partial product, the scales and the running sum
rounded to bfloat16.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np

from kernel_harness.ops.quantized_matmul.cases import QmmCase
from kernel_harness.ops.quantized_matmul.quantize import ROUNDINGS, quantize

#: The op's core, which a quantized matmul kernel computes inside its body
#: (``KernelExpectation.forward_computes``): a kernel that only copies fails.
KERNEL_CORE = {"dot_general": "the product of x (or its quantized rows) and w_q"}


def grouped_operands(case: QmmCase, inputs: dict[str, np.ndarray], rounding: str
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(x_q [b, g, k], x_scale [b, g], w_q [o, g, k], w_scale [o, g])`` in float64: x
    quantized per group by ``rounding`` (or x itself with scale 1), the weights' values
    and their scales per output channel and group."""
    g, k = case.n_in // case.group, case.group
    x = np.asarray(inputs["x"]).astype(np.float32).reshape(case.n_batch, g, k)
    if case.x_q_dtype == "none":
        x_q, x_scale = x.astype(np.float64), np.ones((case.n_batch, g))
    else:
        x_q, x_scale = quantize(x, case.x_q_dtype, rounding)
    w_q = np.asarray(inputs["w_q"]).astype(np.float64).reshape(case.n_out, g, k)
    w_scale = np.asarray(inputs["w_scale"], np.float64)
    w_scale = w_scale[:, None] if case.scale_block is None else w_scale[:, 0, :].T
    return x_q, x_scale, w_q, w_scale


def exact_product(case: QmmCase, inputs: dict[str, np.ndarray], rounding: str
                  ) -> np.ndarray:
    """``out`` [n_batch, n_out] in float64: each group's exact product of quantized values,
    scaled by the group's x and w scales, summed over the groups."""
    x_q, x_scale, w_q, w_scale = grouped_operands(case, inputs, rounding)
    partial = np.einsum("bgk,ogk->bgo", x_q, w_q)
    return (partial * x_scale[:, :, None] * w_scale.T[None]).sum(axis=1)


def bfloat16_product(case: QmmCase, inputs: dict[str, np.ndarray], rounding: str
                     ) -> np.ndarray:
    """``out`` [n_batch, n_out] as bfloat16 accumulation gives it: per group in order, the
    partial product (exact, rounded once to bfloat16) times the bfloat16 x scale times the
    bfloat16 w scale, added to a bfloat16 running sum; every operation rounds to bfloat16."""
    bf16 = ml_dtypes.bfloat16
    x_q, x_scale, w_q, w_scale = grouped_operands(case, inputs, rounding)
    partial = np.einsum("bgk,ogk->bgo", x_q, w_q).astype(np.float32).astype(bf16)
    xs, ws = x_scale.astype(np.float32).astype(bf16), w_scale.astype(np.float32).astype(bf16)
    acc = None
    for j in range(partial.shape[1]):
        term = (partial[:, j, :] * xs[:, j, None]) * ws[None, :, j]
        acc = term if acc is None else (acc + term).astype(bf16)
    return np.asarray(acc).astype(np.float64)


def reference_for(rounding: str = "toward-zero"
                  ) -> Callable[[QmmCase, dict[str, np.ndarray]], dict[str, np.ndarray]]:
    """``Family.reference``: :func:`exact_product` with int8 activations rounded as the
    contract declares."""
    if rounding not in ROUNDINGS:
        raise ValueError(f"rounding must be one of {ROUNDINGS}, got {rounding!r}")

    def reference(case: QmmCase, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """``out`` [n_batch, n_out], float32."""
        return {"out": exact_product(case, inputs, rounding).astype(np.float32)}

    return reference


def bfloat16_accumulation(rounding: str) -> Callable[..., dict[str, np.ndarray]]:
    """``Family.low_precision_reference`` for a kernel that accumulates in bfloat16
    (:func:`bfloat16_product`): the best such a kernel can do, up to the order of its
    float32 dot."""
    if rounding not in ROUNDINGS:
        raise ValueError(f"rounding must be one of {ROUNDINGS}, got {rounding!r}")

    def twin(case: QmmCase, inputs: dict[str, np.ndarray], backend: Any = None
             ) -> dict[str, np.ndarray]:
        """``out`` as bfloat16 accumulation gives it (``backend`` unused)."""
        return {"out": bfloat16_product(case, inputs, rounding).astype(np.float32)}

    return twin
