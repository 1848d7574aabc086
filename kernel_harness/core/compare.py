"""Measuring how far a kernel's output is from the reference, and the fixed bound's rules.

:func:`compare` reduces one named output to :class:`OutputStats`: max abs
error, max error relative to the output's scale, mismatch fraction, NaN/Inf
counts and the worst element by named axis. :func:`contract_problems` and
:func:`bound_problems` state what fails on those stats (the whole fixed judge);
:func:`kernel_harness.core.tolerance.judge` applies them with a family's tolerance.

This module is standalone (the standard library and numpy only): export scripts embed
its source verbatim (:mod:`kernel_harness.regression.export`), so a script judges with
this very code, not a copy of it.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

#: Scales below this are treated as this: an output that is (nearly) all zero, e.g. a dq
#: whose every row sees one key, must not turn rounding noise into a huge relative error.
TINY_SCALE = 1e-6

#: Axis names that run *within* one result (a head_dim vector, a key row of a bias
#: gradient): a slice for per-slice judging spans them.
WITHIN_RESULT_AXES = frozenset({"dim", "head_dim"})


def derive_slice_axes(axes: tuple[str, ...]) -> tuple[str, ...]:
    """The axes that index independent results of an output with ``axes``: every axis
    except within-row ones (``dim``), and except ``key`` where the output also has a
    ``query`` axis (a ``[.., query, key]`` bias gradient is judged row by row)."""
    drop = set(WITHIN_RESULT_AXES)
    if "query" in axes and "key" in axes:
        drop.add("key")
    return tuple(a for a in axes if a not in drop)


def slice_layout(
    output: str, axes: tuple[str, ...], slice_axes: tuple[str, ...] | None
) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """``(slice axes, positions of the axes a slice spans)`` of an output with ``axes``;
    ``slice_axes=None`` derives them (:func:`derive_slice_axes`). An axis not in ``axes``
    is a ValueError naming the output."""
    s_axes = derive_slice_axes(axes) if slice_axes is None else tuple(slice_axes)
    unknown = set(s_axes) - set(axes)
    if unknown:
        raise ValueError(f"output {output!r}: slice axes {sorted(unknown)} not in {axes}")
    return s_axes, tuple(i for i, name in enumerate(axes) if name not in s_axes)


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
    #: Non-finite reference values among the compared elements, and the first one's index
    #: (whether the contract allows them is :func:`~kernel_harness.core.tolerance.judge`'s
    #: business; they are compared by position either way).
    nonfinite_expected: int = 0
    nonfinite_expected_index: tuple[int, ...] = ()
    #: Per-slice judging: the axes whose index names a slice, the floor (fraction of
    #: ``scale``) under which a slice's own scale is not taken, the worst element's error
    #: relative to its own slice's (floored) scale, that slice's index and own scale.
    slice_axes: tuple[str, ...] = ()
    slice_floor: float = 1.0
    slice_rel_err: float = 0.0
    worst_slice: tuple[int, ...] = ()
    worst_slice_scale: float = 0.0
    slice_worst_index: tuple[int, ...] = ()

    @property
    def worst_location(self) -> str:
        """The worst index by named axis, e.g. ``batch=0 head=1 query=37 dim=5``."""
        if not self.worst_index:
            return "-"
        return " ".join(f"{a}={i}" for a, i in zip(self.axes, self.worst_index, strict=True))

    @property
    def worst_slice_location(self) -> str:
        """The worst slice by named axis, e.g. ``batch=0 head=1 query=37``."""
        if not self.slice_worst_index:
            return "-"
        return " ".join(
            f"{a}={i}" for a, i in zip(self.axes, self.slice_worst_index, strict=True)
            if a in self.slice_axes
        )

    @property
    def nonfinite_expected_location(self) -> str:
        """Where the first non-finite reference value is."""
        return " ".join(
            f"{a}={i}" for a, i in zip(self.axes, self.nonfinite_expected_index, strict=True)
        ) or "-"

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
    slice_axes: tuple[str, ...] | None = None,
    slice_floor: float = 1.0,
    magnitude: np.ndarray | None = None,
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
      slice_axes: the axes indexing independent results (default
        :func:`derive_slice_axes`); each element's error is also measured against the
        largest reference magnitude of its own slice, floored at ``slice_floor`` times
        the output's scale (so an all-but-zero slice does not turn rounding into a
        failure). ``slice_floor=1`` makes the slice measure the global one.
      magnitude: optional, same shape: the size of what each element sums (e.g. the sum
        of |terms| of a reduction that cancels); an element's scale is then the larger of
        |expected| and its magnitude, since rounding error follows the summed terms,
        not the (possibly tiny) result.

    NaN and Inf are compared by position: the same non-finite value on both sides is no
    error; anything else against a non-finite value (a kernel NaN against a reference
    -inf, a finite kernel value against a reference NaN) is an infinite error.

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
    abs_e = np.where(finite_e, np.abs(e), 0.0)
    if magnitude is not None:
        abs_e = np.where(finite_e, np.maximum(abs_e, np.abs(np.asarray(magnitude, float))), 0.0)
    scale = max(float(abs_e.max()) if abs_e.size else 0.0, TINY_SCALE)
    both_finite = np.isfinite(a) & np.isfinite(e)
    same_nonfinite = (np.isnan(a) & np.isnan(e)) | (np.isinf(a) & (a == e))
    with np.errstate(invalid="ignore"):
        err = np.where(both_finite, np.abs(a - e), np.where(same_nonfinite, 0.0, np.inf))
    err = np.where(mask, err, 0.0)
    bad_e = mask & ~np.isfinite(e)
    bad_e_index = tuple(int(i) for i in np.argwhere(bad_e)[0]) if bad_e.any() else ()
    if n:
        flat = int(np.argmax(err))
        worst = tuple(int(i) for i in np.unravel_index(flat, a.shape))
        max_abs = float(err[worst])
    else:
        worst, max_abs = (), 0.0
    mismatches = int(np.count_nonzero(err > mismatch_threshold_rel * scale))
    s_axes, within = slice_layout(output, tuple(axes), slice_axes)
    slice_scale = abs_e.max(axis=within, keepdims=True) if within else abs_e
    floored = np.maximum(slice_scale, max(slice_floor * scale, TINY_SCALE))
    slice_rel = err / floored
    if n:
        s_flat = int(np.argmax(slice_rel))
        s_worst = tuple(int(i) for i in np.unravel_index(s_flat, a.shape))
        s_rel = float(slice_rel[s_worst])
        s_idx = tuple(0 if d in within else i for d, i in enumerate(s_worst))
        s_scale = float(slice_scale[s_idx if within else s_worst])
        worst_slice = tuple(i for d, i in enumerate(s_worst) if d not in within)
    else:
        s_worst, s_rel, s_scale, worst_slice = (), 0.0, 0.0, ()
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
        nonfinite_expected=int(np.count_nonzero(bad_e)),
        nonfinite_expected_index=bad_e_index,
        slice_axes=s_axes,
        slice_floor=slice_floor,
        slice_rel_err=s_rel,
        worst_slice=worst_slice,
        worst_slice_scale=s_scale,
        slice_worst_index=s_worst,
    )


def contract_problems(stats: OutputStats, *, nonfinite_reference_ok: bool = False) -> list[str]:
    """What fails ``stats`` whatever the error bound: a non-finite reference value inside
    the contract (unless ``nonfinite_reference_ok``), zero compared elements in a
    non-empty output, any NaN/Inf the reference does not have."""
    problems: list[str] = []
    if stats.nonfinite_expected and not nonfinite_reference_ok:
        problems.append(
            f"HARNESS ERROR: the reference has {stats.nonfinite_expected} non-finite "
            f"value(s) inside the contract, first at {stats.nonfinite_expected_location}; "
            "the contract does not allow that, so the reference or the case is broken "
            "(not a kernel verdict)"
        )
    if stats.compared == 0 and math.prod(stats.shape) > 0:
        problems.append(
            "no element compared: the contract excludes the whole output, so nothing was "
            "checked"
        )
    extra_nan = stats.nan_actual - stats.nan_expected
    extra_inf = stats.inf_actual - stats.inf_expected
    if extra_nan > 0:
        problems.append(f"{extra_nan} NaN not in the reference")
    if extra_inf > 0:
        problems.append(f"{extra_inf} Inf not in the reference")
    return problems


def bound_problems(stats: OutputStats, max_rel_err: float) -> list[str]:
    """The fixed bound: the max error relative to the global scale, then relative to its
    own slice's (floored) scale, must be at most ``max_rel_err`` (NaN fails)."""
    if not stats.max_rel_err <= max_rel_err:
        return [f"max rel err {stats.max_rel_err:.3g} > tolerance {max_rel_err:.3g}"]
    if not stats.slice_rel_err <= max_rel_err:
        return [
            f"slice rel err {stats.slice_rel_err:.3g} > tolerance "
            f"{max_rel_err:.3g} in slice {stats.worst_slice_location} (its own "
            f"scale {stats.worst_slice_scale:.3g}, global {stats.scale:.3g}, floor "
            f"{stats.slice_floor:.3g} x global)"
        ]
    return []
