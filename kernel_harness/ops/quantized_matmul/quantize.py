"""Symmetric quantization over the last axis, the one rule the quantized matmul op uses for
both operands: the harness's weights (rounded to nearest, in :mod:`.cases`) and the
reference's activations (rounded as the contract declares, in :mod:`.reference`).

``scale = max|v| / QMAX[dtype]`` in float32, ``q = R(v * (1 / scale))`` in float32 and clipped
to the dtype's range: for int8, R is truncation toward zero (``astype(int8)``) or round half
to even (``jnp.round``); for float8_e4m3fn, R is the format's own conversion (round to
nearest even; the rounding option does not apply). A group of zeros gets the inverse scale
QMAX (the kernel's ``nan_to_num(1 / 0, dtype_max)``) and quantizes to zeros.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

#: How a value becomes int8: truncation toward zero, or round half to even.
ROUNDINGS: tuple[str, ...] = ("toward-zero", "nearest")
#: The largest magnitude of each quantized dtype: a group's scale is max|v| / QMAX.
QMAX: dict[str, float] = {"int8": 127.0, "float8_e4m3fn": 448.0}
#: numpy storage of each quantized dtype.
STORAGE: dict[str, type] = {"int8": np.int8, "float8_e4m3fn": ml_dtypes.float8_e4m3fn}


def quantize(v: np.ndarray, dtype: str, rounding: str = "nearest"
             ) -> tuple[np.ndarray, np.ndarray]:
    """``(q, scale)``: ``q`` float64 holding the quantized values (exactly representable in
    ``dtype``) with ``v``'s shape, ``scale`` float64 with the last axis dropped."""
    if dtype not in QMAX:
        raise ValueError(f"quantized dtype must be one of {tuple(QMAX)}, got {dtype!r}")
    if rounding not in ROUNDINGS:
        raise ValueError(f"rounding must be one of {ROUNDINGS}, got {rounding!r}")
    qmax = np.float32(QMAX[dtype])
    v32 = np.asarray(v).astype(np.float32)
    scale = (np.abs(v32).max(axis=-1) / qmax).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(scale > 0, np.float32(1) / scale, qmax).astype(np.float32)
    scaled = (v32 * inv[..., None]).astype(np.float32)
    if dtype == "int8":
        q = np.trunc(scaled) if rounding == "toward-zero" else np.rint(scaled)
        q = np.clip(q, -128, 127)
    else:
        q = np.clip(scaled, -qmax, qmax).astype(STORAGE[dtype]).astype(np.float64)
    return q.astype(np.float64), scale.astype(np.float64)


def stored(q: np.ndarray, dtype: str) -> np.ndarray:
    """Quantized values (from :func:`quantize`) in the dtype's numpy storage."""
    return np.asarray(q).astype(STORAGE[dtype])
