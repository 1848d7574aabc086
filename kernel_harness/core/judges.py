"""Judges as objects: what one (dtype, output) tolerance does with a kernel's output.

What the judge knows of one output of one case is one record, :class:`JudgedOutput`
(its name, the reference output it is compared with, axes, tolerance, slice axes, the
contract's mask, whether non-finite reference values are allowed); a family's facts are
gathered into it in one place (:func:`kernel_harness.records.outputs.judged_outputs`).
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
from kernel_harness.core.elements import ElementStats, measure_elements
from kernel_harness.core.tolerance import Tolerance, Verdict, judge


@dataclasses.dataclass(frozen=True, kw_only=True)
class JudgedOutput:
    """One output of one case as the judge sees it.

    Attributes:
      name: the output as the kernel adapter returns it (``out``, ``out_vjp``).
      reference: the reference output it is compared with: ``name``, or for an extra
        output that must equal another (``Family.same_as``), that other output.
      axes: one name per dimension (of ``reference``).
      tolerance: the bound of the case's dtype for ``reference``.
      slice_axes: the axes indexing independent results; None derives them
        (:func:`kernel_harness.core.compare.derive_slice_axes`).
      valid: elements inside the kernel's contract (broadcastable); None: all.
      nonfinite_reference_ok: the contract allows non-finite reference values inside
        ``valid`` (compared by position); elsewhere one is an error.
      dtype: the dtype the kernel stores the output in (the case's), the unit of an
        element bound (``Tolerance.per_element``); required where one is declared.
    """

    name: str
    reference: str
    axes: tuple[str, ...]
    tolerance: Tolerance
    slice_axes: tuple[str, ...] | None = None
    valid: np.ndarray | None = None
    nonfinite_reference_ok: bool = False
    dtype: str | None = None

    @property
    def judge(self) -> Judge:
        """The judge its tolerance declares (:func:`judge_for`)."""
        return judge_for(self.tolerance)

    def excluded(self, shape: tuple[int, ...]) -> int:
        """How many elements of an output of ``shape`` ``valid`` leaves out (an extra
        output's are its reference's, counted there: 0)."""
        if self.valid is None or self.name != self.reference:
            return 0
        return int(np.prod(shape) - np.broadcast_to(self.valid, shape).sum())


@dataclasses.dataclass(frozen=True, kw_only=True)
class Measurement:
    """One output measured by a judge: the error statistics, and the calibrated measure
    where the judge is calibrated."""

    stats: OutputStats
    calibration: CalibratedStats | None = None
    elements: ElementStats | None = None


class Judge(Protocol):
    """The judge of one (dtype, output)."""

    @property
    def tolerance(self) -> Tolerance: ...

    def measure(self, actual: np.ndarray, expected: np.ndarray, out: JudgedOutput, *,
                magnitude: np.ndarray | None = None,
                lowp: np.ndarray | None = None) -> Measurement:
        """Measures ``actual`` against ``expected`` as ``out`` says (``magnitude``: the size
        of the summed terms; ``lowp``: the low-precision computation of the same output,
        which a calibrated judge needs)."""
        ...

    def verdict(self, measurement: Measurement, out: JudgedOutput) -> Verdict:
        """Passed or not, with the problems."""
        ...

    def describe(self) -> str:
        """The judge in a few words, as ``kernel-harness describe`` prints it in its
        tolerance table (the bound's number and reason have their own columns)."""
        ...


def _stats(tol: Tolerance, actual: np.ndarray, expected: np.ndarray, out: JudgedOutput,
           magnitude: np.ndarray | None) -> OutputStats:
    return compare(actual, expected, output=out.name, axes=out.axes, valid=out.valid,
                   slice_axes=out.slice_axes, magnitude=magnitude,
                   mismatch_threshold_rel=tol.max_rel_err, slice_floor=tol.slice_floor.fraction)


def _with_elements(judge_name: str, tol: Tolerance) -> str:
    return judge_name if tol.per_element is None else (
        f"{judge_name}; {tol.per_element.describe()}")


def _elements(tol: Tolerance, actual: np.ndarray, expected: np.ndarray, out: JudgedOutput,
              lowp: np.ndarray | None) -> ElementStats | None:
    """The per-element measure where ``tol`` declares an element bound (else None)."""
    bound = tol.per_element
    if bound is None:
        return None
    if out.dtype is None:
        raise ValueError(f"output {out.name!r} declares an element bound: its JudgedOutput "
                         "needs the dtype the kernel stores it in")
    multiple = tol.calibrated.multiple if tol.calibrated is not None else 0.0
    return measure_elements(actual, expected, output=out.name, axes=out.axes,
                            dtype=out.dtype, bound=bound, valid=out.valid,
                            slice_axes=out.slice_axes, slice_floor=tol.slice_floor.fraction,
                            lowp=lowp if bound.calibrated else None, multiple=multiple)


@dataclasses.dataclass(frozen=True)
class FixedJudge:
    """Error at most ``tolerance.max_rel_err`` of the global scale and of each slice's
    (floored) scale."""

    tolerance: Tolerance

    def measure(self, actual: np.ndarray, expected: np.ndarray, out: JudgedOutput, *,
                magnitude: np.ndarray | None = None,
                lowp: np.ndarray | None = None) -> Measurement:
        """See :meth:`Judge.measure`; ``lowp`` is not used."""
        return Measurement(stats=_stats(self.tolerance, actual, expected, out, magnitude),
                           elements=_elements(self.tolerance, actual, expected, out, None))

    def verdict(self, measurement: Measurement, out: JudgedOutput) -> Verdict:
        """See :meth:`Judge.verdict`."""
        return judge(measurement.stats, self.tolerance, elements=measurement.elements,
                     nonfinite_reference_ok=out.nonfinite_reference_ok)

    def describe(self) -> str:
        """See :meth:`Judge.describe`: ``fixed`` (and the element bound, where declared)."""
        return _with_elements("fixed", self.tolerance)


@dataclasses.dataclass(frozen=True)
class CalibratedJudge:
    """Error at most ``multiple`` x the low-precision computation's error + ``floor``,
    globally and per slice (``tolerance.calibrated``)."""

    tolerance: Tolerance

    def __post_init__(self) -> None:
        if self.tolerance.calibrated is None:
            raise ValueError("CalibratedJudge needs a tolerance that declares `calibrated`")

    def measure(self, actual: np.ndarray, expected: np.ndarray, out: JudgedOutput, *,
                magnitude: np.ndarray | None = None,
                lowp: np.ndarray | None = None) -> Measurement:
        """See :meth:`Judge.measure`; ``lowp`` is required."""
        if lowp is None:
            raise ValueError(f"output {out.name!r} is judged by the calibrated bound: pass the "
                             "low-precision computation (lowp)")
        t, cal = self.tolerance, self.tolerance.calibrated
        assert cal is not None
        return Measurement(
            stats=_stats(t, actual, expected, out, magnitude),
            calibration=measure_calibrated(
                actual, lowp, expected, multiple=cal.multiple, floor=cal.floor,
                slice_floor=t.slice_floor.fraction, output=out.name, axes=out.axes,
                valid=out.valid, slice_axes=out.slice_axes, magnitude=magnitude),
            elements=_elements(t, actual, expected, out, lowp),
        )

    def verdict(self, measurement: Measurement, out: JudgedOutput) -> Verdict:
        """See :meth:`Judge.verdict`."""
        return judge(measurement.stats, self.tolerance, calibration=measurement.calibration,
                     elements=measurement.elements,
                     nonfinite_reference_ok=out.nonfinite_reference_ok)

    def describe(self) -> str:
        """See :meth:`Judge.describe`: ``calibrated MULTIPLEx + FLOOR``."""
        cal = self.tolerance.calibrated
        assert cal is not None
        return _with_elements(f"calibrated {cal.multiple:g}x + {cal.floor:.3g}",
                              self.tolerance)


def judge_for(tolerance: Tolerance) -> Judge:
    """The judge ``tolerance`` declares: calibrated where it has ``calibrated``, else fixed."""
    return CalibratedJudge(tolerance) if tolerance.calibrated is not None else FixedJudge(tolerance)


def judge_output(out: JudgedOutput, actual: np.ndarray, expected: np.ndarray, *,
                 magnitude: np.ndarray | None = None,
                 lowp: np.ndarray | None = None) -> Verdict:
    """``out``'s judge, measuring and deciding: the one call every check makes."""
    judge_ = out.judge
    return judge_.verdict(judge_.measure(actual, expected, out, magnitude=magnitude,
                                         lowp=lowp), out)
