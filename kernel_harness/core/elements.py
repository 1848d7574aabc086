"""Each element judged by its own size, beside the global and per-slice bounds.

The global and per-slice bounds measure an element's error against the largest reference
magnitude of its output or slice: an error of 1e-3 of a row's largest probability passes,
whether it sits on that probability or on one a million times smaller. Where the small
elements are values in their own right (a softmax's tail probabilities, which sampling and
a later log read; a rotation rounded once to its dtype), that hides real defects: a kernel
that flushes the tail to zero, or rounds twice, stays inside the slice bound.

An output's tolerance may declare an :class:`ElementBound`: each element's error is then
also at most ``ulps`` units in the last place of the output's dtype at the reference
value, plus ``floor`` of its slice's scale (the computation's own error where terms
cancel), plus, with ``calibrated``, the calibrated ``multiple`` x the low-precision
computation's error at that very element (the rounding the family's precision design
does there). A value below the dtype's smallest normal is judged by the spacing of
subnormals there, and any error up to float32's smallest normal (2^-126) is allowed: XLA's
CPU and GPU code flushes float32 subnormals to zero, so a result that small may come out
as 0 from a correct kernel (a softmax's probability of 1e-39 does).

This module is standalone (the standard library and numpy only), like
:mod:`~kernel_harness.core.compare`.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from kernel_harness.core.compare import TINY_SCALE, slice_layout

#: (precision in bits, the implicit one included; smallest normal exponent) of each float
#: format an output may be stored in.
FORMATS: dict[str, tuple[int, int]] = {
    "float64": (53, -1022), "float32": (24, -126), "bfloat16": (8, -126),
    "float16": (11, -14),
}

#: Errors up to float32's smallest normal are allowed whatever the output's dtype: float32
#: arithmetic flushes subnormals to zero on XLA's CPU and GPU backends.
FLUSHED = 2.0**-126


@dataclasses.dataclass(frozen=True, kw_only=True)
class ElementBound:
    """Each element's error at most ``ulps`` units in the last place of the output's dtype
    at the reference value + ``floor`` x its slice's (floored) scale (+ with
    ``calibrated``, the calibrated judge's multiple x the low-precision computation's
    error at the element), and why."""

    ulps: float
    floor: float
    reason: str
    calibrated: bool = False

    def __post_init__(self) -> None:
        if not self.ulps > 0:
            raise ValueError(f"ulps must be positive, got {self.ulps}")
        if not 0 <= self.floor < 0.1:
            raise ValueError(f"floor must be in [0, 0.1), got {self.floor}")
        if not self.reason.strip():
            raise ValueError("an element bound needs its reason")

    def describe(self) -> str:
        """The bound in a few words (``describe``'s judge column)."""
        return (f"each element <= {self.ulps:g} ulp + {self.floor:.3g} x slice"
                + (" + multiple x its low-precision error" if self.calibrated else ""))


@dataclasses.dataclass(frozen=True, kw_only=True)
class ElementStats:
    """The per-element measure of one output: the largest error over its element's bound
    (``usage``, above 1 fails), where, and how many elements are over."""

    output: str
    dtype: str
    usage: float
    checked: int
    over: int
    worst_where: str = "-"
    worst_actual: float = math.nan
    worst_expected: float = math.nan
    worst_err_ulps: float = 0.0
    worst_allowed_ulps: float = 0.0

    @property
    def passed(self) -> bool:
        return self.usage <= 1.0

    def problem(self) -> str:
        """The failure line."""
        return (f"per element: {self.worst_actual:.6g} against {self.worst_expected:.6g} at "
                f"{self.worst_where}: error {self.worst_err_ulps:.3g} ulp of {self.dtype} > "
                f"{self.worst_allowed_ulps:.3g} allowed there ({self.over} of {self.checked} "
                "elements over their own bound)")


def ulp(values: np.ndarray, dtype: str) -> np.ndarray:
    """The unit in the last place of ``dtype`` at each of ``values`` (its binade's spacing;
    the subnormals' spacing below the smallest normal)."""
    if dtype not in FORMATS:
        raise ValueError(f"no per-element bound for dtype {dtype!r}: one of {sorted(FORMATS)}")
    precision, emin = FORMATS[dtype]
    v = np.abs(np.asarray(values, np.float64))
    _, exp = np.frexp(v)
    # frexp's mantissa is in [0.5, 1); 0 (exponent 0 there) has the subnormals' spacing
    exp = np.where(v > 0, np.maximum(exp - 1, emin), emin)
    return np.ldexp(1.0, (exp - (precision - 1)).astype(np.int64))


def measure_elements(
    actual: np.ndarray, expected: np.ndarray, *, output: str, axes: tuple[str, ...],
    dtype: str, bound: ElementBound, valid: np.ndarray | None = None,
    slice_axes: tuple[str, ...] | None = None, slice_floor: float = 1.0,
    lowp: np.ndarray | None = None, multiple: float = 0.0,
) -> ElementStats:
    """Each finite element of ``actual`` inside ``valid`` against its own bound (see
    :class:`ElementBound`); ``lowp`` and ``multiple`` are the calibrated judge's yardstick
    (required where ``bound.calibrated``). Non-finite values are
    :func:`~kernel_harness.core.compare.compare`'s business."""
    if bound.calibrated and lowp is None:
        raise ValueError(f"output {output!r}: a calibrated element bound needs the "
                         "low-precision computation")
    a = np.asarray(actual, np.float64)
    e = np.asarray(expected, np.float64)
    mask = np.ones(e.shape, bool) if valid is None else np.broadcast_to(valid, e.shape)
    finite = mask & np.isfinite(e)
    abs_e = np.where(finite, np.abs(e), 0.0)
    scale = max(float(abs_e.max()) if abs_e.size else 0.0, TINY_SCALE)
    _, within = slice_layout(output, tuple(axes), slice_axes)
    slice_scale = abs_e.max(axis=within, keepdims=True) if within else abs_e
    floored = np.maximum(slice_scale, max(slice_floor * scale, TINY_SCALE))
    judged = finite & np.isfinite(a)
    unit = ulp(np.where(judged, e, 0.0), dtype)
    allowed = np.maximum(bound.ulps * unit + bound.floor * floored, FLUSHED)
    if bound.calibrated:
        with np.errstate(invalid="ignore"):
            l_err = np.abs(np.asarray(lowp, np.float64) - e)
        allowed = allowed + multiple * np.where(np.isfinite(l_err), l_err, 0.0)
    err = np.where(judged, np.abs(a - e), 0.0)
    use = err / allowed
    checked = int(judged.sum())
    if not checked:
        return ElementStats(output=output, dtype=dtype, usage=0.0, checked=0, over=0)
    idx = np.unravel_index(int(np.argmax(use)), use.shape)
    return ElementStats(
        output=output, dtype=dtype, usage=float(use[idx]), checked=checked,
        over=int(np.count_nonzero(use > 1.0)),
        worst_where=" ".join(f"{n}={int(i)}" for n, i in zip(axes, idx, strict=True)) or "-",
        worst_actual=float(a[idx]), worst_expected=float(e[idx]),
        worst_err_ulps=float(err[idx] / unit[idx]),
        worst_allowed_ulps=float(np.broadcast_to(allowed, e.shape)[idx] / unit[idx]))
