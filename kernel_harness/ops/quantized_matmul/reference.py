"""The independent reference of the quantized matmul op, in exact arithmetic, with the
quantization of the activations as declared contract options.

With activations quantized (``x_q_dtype="int8"``), per row: ``scale = max|x| / 127`` and
``x_q = R(x * (1 / scale))`` in float32 (exact for the op's cases, whose scales are powers
of two), where R is the contract's ``rounding`` (``toward-zero``: truncation, as ``astype(int8)``;
``nearest``: round half to even); then ``out = (x_q @ w_q^T) * scale * w_scale`` with the
integer products summed exactly (int64) and the scaling in float64. Without:
``out = (x @ w_q^T) * w_scale`` in float64. Returned as float32.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kernel_harness.ops.quantized_matmul.cases import QmmCase

#: How a row of x becomes int8: truncation toward zero, or round half to even.
ROUNDINGS: tuple[str, ...] = ("toward-zero", "nearest")


def quantize_rows(x: np.ndarray, rounding: str) -> tuple[np.ndarray, np.ndarray]:
    """``(x_q int64 [n, k], scale float64 [n])``: each row of x scaled to +-127 in float32
    and rounded by ``rounding``; a row of zeros gets the inverse scale 127."""
    if rounding not in ROUNDINGS:
        raise ValueError(f"rounding must be one of {ROUNDINGS}, got {rounding!r}")
    x32 = np.asarray(x).astype(np.float32)
    scale = (np.abs(x32).max(axis=1) / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(scale > 0, np.float32(1) / scale, np.float32(127)).astype(np.float32)
    scaled = (x32 * inv[:, None]).astype(np.float32)
    q = np.trunc(scaled) if rounding == "toward-zero" else np.rint(scaled)
    return np.clip(q, -128, 127).astype(np.int64), scale.astype(np.float64)


def reference_for(rounding: str = "toward-zero"
                  ) -> Callable[[QmmCase, dict[str, np.ndarray]], dict[str, np.ndarray]]:
    """``Family.reference`` with the activations rounded as the contract declares."""
    quantize_rows(np.zeros((1, 1), np.float32), rounding)  # checks the name

    def reference(case: QmmCase, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """``out`` [n_batch, n_out], float32."""
        w_q = np.asarray(inputs["w_q"], np.int64)
        w_scale = np.asarray(inputs["w_scale"], np.float64)
        if case.x_q_dtype == "none":
            out = np.asarray(inputs["x"], np.float64) @ w_q.T.astype(np.float64) * w_scale
        else:
            x_q, scale = quantize_rows(inputs["x"], rounding)
            out = (x_q @ w_q.T).astype(np.float64) * scale[:, None] * w_scale
        return {"out": out.astype(np.float32)}

    return reference
