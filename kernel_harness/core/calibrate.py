"""Measuring a kernel's error against a low-precision yardstick (no judging here).

The calibrated judge (the approach of FlashAttention's tests): the same plain math as
the reference, computed with the case's own low-precision inputs at the backend's
default matmul precision (a family's ``low_precision_reference``), errs by some amount
against the high-precision reference; that error is what low precision costs for *this*
case (it grows with the logit scale, with cancellation, with long rows). The kernel's
error is then bounded by a stated multiple of it plus a small floor, globally and per
slice (:class:`~kernel_harness.core.tolerance.Calibrated`,
:func:`~kernel_harness.core.tolerance.judge`).

:func:`measure_calibrated` reduces the kernel's and the yardstick's errors to
:class:`CalibratedStats`, with both measured against the *reference's* scales (the same
global scale and the same floored per-slice scales as
:func:`~kernel_harness.core.compare.compare`), so their ratio is a ratio of errors.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from kernel_harness.core.compare import TINY_SCALE, derive_slice_axes


@dataclasses.dataclass(frozen=True, kw_only=True)
class CalibratedStats:
    """The kernel's error next to the low-precision computation's, globally and per slice.

    Errors are relative: globally to the output's scale (max |reference|), per slice to
    the slice's own scale floored at ``slice_floor`` x the global one. ``usage`` is the
    largest ``kernel error / (multiple x low-precision error + floor)`` over the global
    measure and every slice (above 1 fails); ``worst_slice`` is the slice where it is
    largest, with both errors there.
    """

    output: str
    multiple: float
    floor: float
    kernel_rel_err: float
    lowp_rel_err: float
    usage: float
    worst_where: str
    worst_kernel_err: float
    worst_lowp_err: float
    #: Worst ratio kernel error / low-precision error over the global measure and the
    #: slices, counting only slices whose low-precision error is above the floor (a ratio
    #: over a near-zero yardstick says nothing).
    ratio: float

    @property
    def passed(self) -> bool:
        return self.usage <= 1.0


def _errors(actual: np.ndarray, expected: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """|actual - expected| with NaN/Inf compared by position (as ``compare`` does)."""
    a = np.asarray(actual, np.float64)
    e = np.asarray(expected, np.float64)
    both = np.isfinite(a) & np.isfinite(e)
    same = (np.isnan(a) & np.isnan(e)) | (np.isinf(a) & (a == e))
    with np.errstate(invalid="ignore"):
        err = np.where(both, np.abs(a - e), np.where(same, 0.0, np.inf))
    return np.where(mask, err, 0.0)


def measure_calibrated(
    actual: np.ndarray,
    lowp: np.ndarray,
    expected: np.ndarray,
    *,
    output: str,
    axes: tuple[str, ...],
    multiple: float,
    floor: float,
    valid: np.ndarray | None = None,
    slice_axes: tuple[str, ...] | None = None,
    slice_floor: float = 1.0,
    magnitude: np.ndarray | None = None,
) -> CalibratedStats:
    """Measures the kernel (``actual``) and the low-precision computation (``lowp``)
    against the reference (``expected``), on the same scales, and how much of the bound
    ``multiple x lowp error + floor`` the kernel uses, globally and per slice.

    ``valid``, ``slice_axes``, ``slice_floor`` and ``magnitude`` mean what they mean for
    :func:`~kernel_harness.core.compare.compare`; a slice's low-precision error is taken
    as at least ``slice_floor`` x the global low-precision error (absolute).

    Raises:
      ValueError: if the shapes do not line up.
    """
    expected = np.asarray(expected)
    for name, x in (("kernel", actual), ("low-precision", lowp)):
        if np.shape(x) != expected.shape:
            raise ValueError(f"output {output!r}: {name} shape {np.shape(x)} != reference "
                             f"shape {expected.shape}")
    mask = (np.ones(expected.shape, bool) if valid is None
            else np.broadcast_to(valid, expected.shape))
    e = expected.astype(np.float64)
    finite = np.isfinite(e) & mask
    abs_e = np.where(finite, np.abs(e), 0.0)
    if magnitude is not None:
        abs_e = np.where(finite, np.maximum(abs_e, np.abs(np.asarray(magnitude, float))), 0.0)
    scale = max(float(abs_e.max()) if abs_e.size else 0.0, TINY_SCALE)
    k_err = _errors(actual, expected, mask)
    l_err = _errors(lowp, expected, mask)
    s_axes = derive_slice_axes(tuple(axes)) if slice_axes is None else tuple(slice_axes)
    within = tuple(i for i, name in enumerate(axes) if name not in s_axes)
    slice_scale = abs_e.max(axis=within, keepdims=True) if within else abs_e
    floored = np.maximum(slice_scale, max(slice_floor * scale, TINY_SCALE))
    k_glob, l_glob = float(k_err.max(initial=0.0)) / scale, float(l_err.max(initial=0.0)) / scale
    k_slice = (k_err.max(axis=within, keepdims=True) if within else k_err) / floored
    # A slice's yardstick is at least slice_floor x the global one (as its scale is at
    # least slice_floor x the global scale): the rounding of the large terms a row sums
    # reaches every row, and a kernel whose algorithm cancels differently (flash's
    # dS = P (dP - rowsum(dO O)) from its bf16 O) puts it in other rows than plain
    # autodiff does.
    l_slice = np.maximum(l_err.max(axis=within, keepdims=True) if within else l_err,
                         slice_floor * l_glob * scale) / floored
    with np.errstate(invalid="ignore", divide="ignore"):
        use_slice = k_slice / (multiple * l_slice + floor)
    use_glob = k_glob / (multiple * l_glob + floor)
    if use_slice.size and float(np.nanmax(use_slice, initial=0.0)) > use_glob:
        flat = int(np.argmax(np.nan_to_num(use_slice, nan=np.inf)))
        idx = np.unravel_index(flat, use_slice.shape)
        where = " ".join(f"{a}={int(i)}" for d, (a, i) in enumerate(zip(axes, idx, strict=True))
                         if d not in within) or "-"
        usage, wk, wl = float(use_slice[idx]), float(k_slice[idx]), float(l_slice[idx])
    else:
        usage, wk, wl, where = use_glob, k_glob, l_glob, "global"
    if math.isnan(usage):
        usage = math.inf
    with np.errstate(invalid="ignore", divide="ignore"):
        ratios = np.where(l_slice > floor, k_slice / l_slice, 0.0)
    ratio = max(float(ratios.max(initial=0.0)), k_glob / l_glob if l_glob > floor else 0.0)
    return CalibratedStats(
        output=output, multiple=multiple, floor=floor, kernel_rel_err=k_glob,
        lowp_rel_err=l_glob, usage=usage, worst_where=where, worst_kernel_err=wk,
        worst_lowp_err=wl, ratio=ratio,
    )
