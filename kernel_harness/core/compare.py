"""Measuring how far a kernel's output is from the reference (no judging here).

:func:`compare` reduces one named output to :class:`OutputStats`: max abs
error, max error relative to the output's scale, mismatch fraction, NaN/Inf
counts and the worst element by named axis. Whether that is good enough is
:func:`kernel_harness.core.tolerance.judge`'s business.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

#: Scales below this are treated as this: an output that is (nearly) all zero, e.g. a dq
#: whose every row sees one key, must not turn rounding noise into a huge relative error.
TINY_SCALE = 1e-6


@dataclasses.dataclass(frozen=True, kw_only=True)
class OutputStats:
    """Error statistics of one output (``out``, ``dq``, ...) against its reference."""

    output: str
    shape: tuple[int, ...]
    axes: tuple[str, ...]
    scale: float
    max_abs_err: float
    max_rel_err: float
    worst_index: tuple[int, ...]
    worst_actual: float
    worst_expected: float
    mismatch_threshold_rel: float
    mismatch_fraction: float
    compared: int
    nan_actual: int
    inf_actual: int
    nan_expected: int
    inf_expected: int

    @property
    def worst_location(self) -> str:
        """The worst index by named axis, e.g. ``batch=0 head=1 query=37 dim=5``."""
        if not self.worst_index:
            return "-"
        return " ".join(f"{a}={i}" for a, i in zip(self.axes, self.worst_index, strict=True))

    @property
    def non_finite_actual(self) -> int:
        return self.nan_actual + self.inf_actual


def compare(
    actual: np.ndarray,
    expected: np.ndarray,
    *,
    output: str,
    axes: tuple[str, ...],
    valid: np.ndarray | None = None,
    mismatch_threshold_rel: float = 0.0,
) -> OutputStats:
    """Measures ``actual`` against ``expected``.

    Args:
      actual: the kernel's output, any float dtype.
      expected: the reference output, same shape.
      output: the output's name, for reports.
      axes: one name per dimension (``batch``, ``head``, ``query``, ...).
      valid: optional boolean array broadcastable to the shape; elements where
        it is False are outside the family's contract and are not compared.
      mismatch_threshold_rel: an element counts as a mismatch when its error
        exceeds this fraction of the output's scale.

    Raises:
      ValueError: if shapes or axis names do not line up.
    """
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    if actual.shape != expected.shape:
        raise ValueError(
            f"output {output!r}: kernel shape {actual.shape} != reference shape {expected.shape}"
        )
    if len(axes) != actual.ndim:
        raise ValueError(f"output {output!r}: {len(axes)} axis names for {actual.ndim} dims")
    a = actual.astype(np.float64)
    e = expected.astype(np.float64)
    mask = np.ones(a.shape, bool) if valid is None else np.broadcast_to(valid, a.shape)
    n = int(mask.sum())
    finite_e = np.isfinite(e) & mask
    scale = float(np.max(np.abs(e[finite_e]))) if finite_e.any() else 0.0
    scale = max(scale, TINY_SCALE)
    with np.errstate(invalid="ignore"):  # inf - inf where both are -inf: handled below
        err = np.where(mask, np.abs(a - e), 0.0)
    # A non-finite kernel value where the reference is finite is an infinite error.
    err = np.where(mask & ~np.isfinite(a) & np.isfinite(e), np.inf, err)
    err = np.where(np.isnan(err), 0.0, err)  # both non-finite in the same way: no error
    if n:
        flat = int(np.argmax(err))
        worst = tuple(int(i) for i in np.unravel_index(flat, a.shape))
        max_abs = float(err[worst])
    else:
        worst, max_abs = (), 0.0
    mismatches = int(np.count_nonzero(err > mismatch_threshold_rel * scale))
    return OutputStats(
        output=output,
        shape=tuple(a.shape),
        axes=tuple(axes),
        scale=scale,
        max_abs_err=max_abs,
        max_rel_err=max_abs / scale if math.isfinite(max_abs) else math.inf,
        worst_index=worst,
        worst_actual=float(a[worst]) if worst else math.nan,
        worst_expected=float(e[worst]) if worst else math.nan,
        mismatch_threshold_rel=mismatch_threshold_rel,
        mismatch_fraction=mismatches / n if n else 0.0,
        compared=n,
        nan_actual=int(np.count_nonzero(np.isnan(a) & mask)),
        inf_actual=int(np.count_nonzero(np.isinf(a) & mask)),
        nan_expected=int(np.count_nonzero(np.isnan(e) & mask)),
        inf_expected=int(np.count_nonzero(np.isinf(e) & mask)),
    )
