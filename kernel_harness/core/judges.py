"""Judges as objects: what one (dtype, output) tolerance does with a kernel's output.

A :class:`Judge` measures (:meth:`~Judge.measure`), decides (:meth:`~Judge.verdict`)
and names itself (:meth:`~Judge.describe`, the judge column of ``kernel-harness
describe``). A ``--tolerance`` or ``--tolerance-scale`` changes the tolerance, not the judge:
:func:`~kernel_harness.core.tolerance.merge_tolerances` is that rule. :func:`judge_for`
picks the judge a tolerance declares:
:class:`FixedJudge` (``max_rel_err``, globally and per slice) or :class:`CalibratedJudge`
(a multiple of the low-precision computation's error plus a floor). The measuring and
deciding code is :mod:`~kernel_harness.core.compare` (the fixed rules, embedded verbatim in
export scripts), :mod:`~kernel_harness.core.calibrate` and
:func:`~kernel_harness.core.tolerance.judge`; the judges only bind a tolerance to them.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

import numpy as np

from kernel_harness.core.calibrate import CalibratedStats, measure_calibrated
from kernel_harness.core.compare import OutputStats, compare
from kernel_harness.core.tolerance import Tolerance, Verdict, judge


@dataclasses.dataclass(frozen=True, kw_only=True)
class Measurement:
    """One output measured by a judge: the error statistics, and the calibrated measure
    where the judge is calibrated."""

    stats: OutputStats
    calibration: CalibratedStats | None = None


class Judge(Protocol):
    """The judge of one (dtype, output)."""

    @property
    def tolerance(self) -> Tolerance: ...

    def measure(self, actual: np.ndarray, expected: np.ndarray, *, output: str,
                axes: tuple[str, ...], valid: np.ndarray | None = None,
                slice_axes: tuple[str, ...] | None = None,
                magnitude: np.ndarray | None = None,
                lowp: np.ndarray | None = None) -> Measurement:
        """Measures ``actual`` against ``expected`` (``lowp``: the low-precision
        computation of the same output, which a calibrated judge needs)."""
        ...

    def verdict(self, measurement: Measurement, *,
                nonfinite_reference_ok: bool = False) -> Verdict:
        """Passed or not, with the problems."""
        ...

    def describe(self) -> str:
        """The judge in a few words, as ``kernel-harness describe`` prints it in its
        tolerance table (the bound's number and reason have their own columns)."""
        ...


def _stats(tol: Tolerance, actual: np.ndarray, expected: np.ndarray, **kw: object) -> OutputStats:
    return compare(actual, expected, mismatch_threshold_rel=tol.max_rel_err,
                   slice_floor=tol.slice_floor.fraction, **kw)  # type: ignore[arg-type]


@dataclasses.dataclass(frozen=True)
class FixedJudge:
    """Error at most ``tolerance.max_rel_err`` of the global scale and of each slice's
    (floored) scale."""

    tolerance: Tolerance

    def measure(self, actual: np.ndarray, expected: np.ndarray, *, output: str,
                axes: tuple[str, ...], valid: np.ndarray | None = None,
                slice_axes: tuple[str, ...] | None = None,
                magnitude: np.ndarray | None = None,
                lowp: np.ndarray | None = None) -> Measurement:
        """See :meth:`Judge.measure`; ``lowp`` is not used."""
        return Measurement(stats=_stats(self.tolerance, actual, expected, output=output,
                                        axes=axes, valid=valid, slice_axes=slice_axes,
                                        magnitude=magnitude))

    def verdict(self, measurement: Measurement, *,
                nonfinite_reference_ok: bool = False) -> Verdict:
        """See :meth:`Judge.verdict`."""
        return judge(measurement.stats, self.tolerance,
                     nonfinite_reference_ok=nonfinite_reference_ok)

    def describe(self) -> str:
        """See :meth:`Judge.describe`: ``fixed``."""
        return "fixed"


@dataclasses.dataclass(frozen=True)
class CalibratedJudge:
    """Error at most ``multiple`` x the low-precision computation's error + ``floor``,
    globally and per slice (``tolerance.calibrated``)."""

    tolerance: Tolerance

    def __post_init__(self) -> None:
        if self.tolerance.calibrated is None:
            raise ValueError("CalibratedJudge needs a tolerance that declares `calibrated`")

    def measure(self, actual: np.ndarray, expected: np.ndarray, *, output: str,
                axes: tuple[str, ...], valid: np.ndarray | None = None,
                slice_axes: tuple[str, ...] | None = None,
                magnitude: np.ndarray | None = None,
                lowp: np.ndarray | None = None) -> Measurement:
        """See :meth:`Judge.measure`; ``lowp`` is required."""
        if lowp is None:
            raise ValueError(f"output {output!r} is judged by the calibrated bound: pass the "
                             "low-precision computation (lowp)")
        t, cal = self.tolerance, self.tolerance.calibrated
        assert cal is not None
        kw = dict(output=output, axes=axes, valid=valid, slice_axes=slice_axes,
                  magnitude=magnitude)
        return Measurement(
            stats=_stats(t, actual, expected, **kw),
            calibration=measure_calibrated(actual, lowp, expected, multiple=cal.multiple,
                                           floor=cal.floor, slice_floor=t.slice_floor.fraction,
                                           **kw),  # type: ignore[arg-type]
        )

    def verdict(self, measurement: Measurement, *,
                nonfinite_reference_ok: bool = False) -> Verdict:
        """See :meth:`Judge.verdict`."""
        return judge(measurement.stats, self.tolerance, calibration=measurement.calibration,
                     nonfinite_reference_ok=nonfinite_reference_ok)

    def describe(self) -> str:
        """See :meth:`Judge.describe`: ``calibrated MULTIPLEx + FLOOR``."""
        cal = self.tolerance.calibrated
        assert cal is not None
        return f"calibrated {cal.multiple:g}x + {cal.floor:.3g}"


def judge_for(tolerance: Tolerance) -> Judge:
    """The judge ``tolerance`` declares: calibrated where it has ``calibrated``, else fixed."""
    return CalibratedJudge(tolerance) if tolerance.calibrated is not None else FixedJudge(tolerance)
