"""Tolerances as data, per (dtype, output), and the judging step.

A tolerance bounds the largest error relative to the output's scale (its
largest reference magnitude). Families hold a :class:`ToleranceTable`; the
numbers live there, with the reason for each, and nowhere else.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from kernel_harness.core.calibrate import CalibratedStats
from kernel_harness.core.compare import OutputStats, bound_problems, contract_problems
from kernel_harness.core.elements import ElementBound, ElementStats


@dataclasses.dataclass(frozen=True, kw_only=True)
class Calibrated:
    """The calibrated judge of one (dtype, output): the kernel's error may be at most
    ``multiple`` x the error of the same plain math computed in the case's own dtype at
    the backend's default precision (the family's ``low_precision_reference``) plus
    ``floor`` (a fraction of the scale), globally and in every slice. See
    :mod:`kernel_harness.core.calibrate` and README "Calibrated bounds"."""

    multiple: float
    floor: float
    reason: str

    def __post_init__(self) -> None:
        if not 0 < self.multiple <= 100:
            raise ValueError(f"multiple must be in (0, 100], got {self.multiple}")
        if not 0 < self.floor < 0.1:
            raise ValueError(f"floor must be in (0, 0.1), got {self.floor}")


@dataclasses.dataclass(frozen=True)
class SliceFloor:
    """The floor of per-slice judging of one (dtype, output), and why: a slice's own
    scale is taken as at least ``fraction`` x the output's global scale. Smaller is
    sharper on small slices; too small turns the rounding noise of an all-but-zero slice
    into a failure. Every :class:`Tolerance` declares one (no rule picks it from the
    output's name); the shared ones are the constants below."""

    fraction: float
    reason: str

    def __post_init__(self) -> None:
        if not 0 < self.fraction <= 1:
            raise ValueError(f"slice floor must be in (0, 1], got {self.fraction}")
        if not self.reason.strip():
            raise ValueError("a slice floor needs its reason")


#: float32 results (eps 1.2e-7, tolerances 1e-4..3e-4).
FLOAT32_FLOOR = SliceFloor(1e-2, (
    "float32: the rounding noise of an (all but) zero slice is ~eps x the magnitudes it "
    "summed, which track the global scale; 1/100 leaves 100x headroom over eps and judges "
    "slices down to 1% of the global scale by their own size"))

#: Low-precision results (bf16 rounding 4e-3, tolerances 1.5e-2..3e-2).
LOW_PRECISION_FLOOR = SliceFloor(1 / 16, (
    "low precision: 1/16 keeps the rounding of the large terms (bf16 4e-3) below the "
    "tolerance and still sees a 5% error in a slice 1/10 of the global scale"))

#: Low-precision gradients that sum rounded products across the output's slices.
LOW_PRECISION_GRADIENT_FLOOR = SliceFloor(1 / 4, (
    "low-precision gradient: a row sums bf16-rounded products (p, ds) whose own magnitude "
    "can far exceed the row's result (dq = ds.k cancels), so its error follows the summed "
    "terms, not its own scale: pristine splash measured a dq row at 0.056 x the global "
    "scale with an error of 0.0034 x global (6% of its own scale, tolerance 2.5e-2); 1/4 "
    "keeps that at 0.014, and a 6% error in a slice 1/10 of the global scale still fails "
    "a 2e-2 tolerance"))

#: float32 gradients with rows no query sees.
FLOAT32_GRADIENT_FLOOR = SliceFloor(1 / 32, (
    "float32 gradient: a key no query sees has an exactly-zero reference gradient while "
    "the kernel's masked-out logits leave rounding residue: pristine flash (float32, "
    "causal, segments) gave dk = 6.3e-6 in such a row, 2.2e-6 of the global scale 2.87, "
    "which a 1/100 floor turns into 2.2e-4 > 2e-4; 1/32 keeps that at 7e-5, and a 1% "
    "error in a slice at 1/32 of the global scale still fails 2e-4"))

#: One global scale: the slice measure equals the global one (bounds that are not
#: per-result, e.g. reference drift).
GLOBAL_SCALE_ONLY = SliceFloor(1.0, "judged against the output's global scale only")


def standard_floor(dtype: str, *, gradient: bool) -> SliceFloor:
    """The shared floor for an output at ``dtype``; the caller declares whether the
    output is a gradient whose rows sum rounded products (:data:`FLOAT32_GRADIENT_FLOOR`,
    :data:`LOW_PRECISION_GRADIENT_FLOOR`) or a result judged by its own size
    (:data:`FLOAT32_FLOOR`, :data:`LOW_PRECISION_FLOOR`)."""
    if dtype == "float32":
        return FLOAT32_GRADIENT_FLOOR if gradient else FLOAT32_FLOOR
    return LOW_PRECISION_GRADIENT_FLOOR if gradient else LOW_PRECISION_FLOOR


@dataclasses.dataclass(frozen=True, kw_only=True)
class Tolerance:
    """Largest allowed error as a fraction of the output's scale, the per-slice floor,
    and why."""

    max_rel_err: float
    #: Per-slice judging: the floor of a slice's own scale, with its reason.
    slice_floor: SliceFloor
    reason: str = ""
    #: The calibrated judge, where it replaces ``max_rel_err`` (the fixed bound) for
    #: matches-reference and every check that has the low-precision computation at hand.
    calibrated: Calibrated | None = None
    #: Each element also judged by its own size (:mod:`kernel_harness.core.elements`),
    #: where an output's small elements are values in their own right.
    per_element: ElementBound | None = None

    def __post_init__(self) -> None:
        if self.per_element is not None and self.per_element.calibrated \
                and self.calibrated is None:
            raise ValueError("a calibrated element bound needs the calibrated judge "
                             "(Tolerance.calibrated)")
        if not 0 < self.max_rel_err < 1:
            raise ValueError(f"max_rel_err must be in (0, 1), got {self.max_rel_err}")
        if not isinstance(self.slice_floor, SliceFloor):
            raise TypeError(f"slice_floor must be a SliceFloor (fraction and reason), got "
                            f"{self.slice_floor!r}")


@dataclasses.dataclass(frozen=True)
class ToleranceTable:
    """Tolerances keyed by ``(dtype name, output name)``.

    Example: ``ToleranceTable({("float32", "out"): Tolerance(max_rel_err=2e-4)})``.
    """

    entries: Mapping[tuple[str, str], Tolerance]

    def lookup(self, dtype: str, output: str) -> Tolerance:
        """The tolerance for one output at one dtype; a missing entry is an error."""
        try:
            return self.entries[(dtype, output)]
        except KeyError:
            known = sorted(self.entries)
            raise KeyError(
                f"no tolerance for dtype={dtype!r} output={output!r}; known: {known}"
            ) from None

    @classmethod
    def of_limits(cls, limits: Mapping[tuple[str, str], tuple[float, str]], *,
                  gradients: frozenset[str] = frozenset(),
                  calibrated: Mapping[str, Calibrated] | None = None,
                  per_element: Mapping[tuple[str, str], ElementBound] | None = None,
                  ) -> ToleranceTable:
        """A table from ``{(dtype, output): (max_rel_err, reason)}``: each entry with the
        standard floor of its dtype (:func:`standard_floor`; the gradient one for the
        outputs in ``gradients``), for a dtype in ``calibrated`` that calibrated bound, and
        for a key of ``per_element`` that element bound."""
        calibrated = calibrated or {}
        per_element = per_element or {}
        unknown = sorted(set(per_element) - set(limits))
        if unknown:
            raise ValueError(f"element bounds for entries the table does not have: {unknown}")
        return cls({
            (dtype, out): Tolerance(max_rel_err=limit, reason=reason,
                                    calibrated=calibrated.get(dtype),
                                    per_element=per_element.get((dtype, out)),
                                    slice_floor=standard_floor(dtype, gradient=out in gradients))
            for (dtype, out), (limit, reason) in limits.items()
        })


@dataclasses.dataclass(frozen=True, kw_only=True)
class Verdict:
    """The judgement of one output: passed or not, with the reasons."""

    stats: OutputStats
    tolerance: Tolerance
    passed: bool
    problems: tuple[str, ...]
    #: The calibrated measure where the calibrated judge decided (None: the fixed table).
    calibration: CalibratedStats | None = None
    #: The per-element measure where the tolerance declares an element bound.
    elements: ElementStats | None = None

    @property
    def judged_by(self) -> str:
        """``calibrated`` or ``fixed``."""
        return "fixed" if self.calibration is None else "calibrated"

    @property
    def usage(self) -> float:
        """The largest measured error over what the judge allows (above 1 fails): the
        fixed bound's global and slice errors over ``max_rel_err``, or the calibrated
        usage."""
        if self.calibration is not None:
            usage = self.calibration.usage
        else:
            usage = max(self.stats.max_rel_err, self.stats.slice_rel_err) \
                / self.tolerance.max_rel_err
        return max(usage, self.elements.usage) if self.elements is not None else usage


def judge(
    stats: OutputStats, tolerance: Tolerance, *, nonfinite_reference_ok: bool = False,
    calibration: CalibratedStats | None = None, elements: ElementStats | None = None,
) -> Verdict:
    """Decides whether ``stats`` are within ``tolerance``.

    Fails on: a non-finite reference value inside the contract (unless
    ``nonfinite_reference_ok``: the family's contract says the output may be
    non-finite, and then NaN/Inf are compared by position), zero compared
    elements in a non-empty output, any NaN/Inf the reference does not have, a
    max error relative to the global scale above ``tolerance.max_rel_err``, and a
    max error relative to its own slice's (floored) scale above the same bound.

    With ``calibration`` (the kernel measured next to the low-precision computation,
    :func:`~kernel_harness.core.calibrate.measure_calibrated`, for an output whose
    ``tolerance.calibrated`` is set) the two error bounds are replaced by the calibrated
    one: kernel error <= multiple x low-precision error + floor, globally and per slice;
    the other failures stay. A calibration for a tolerance without ``calibrated`` is an
    error. With ``elements`` (:func:`~kernel_harness.core.elements.measure_elements`, for a
    tolerance with ``per_element``), an element over its own bound fails too; a tolerance
    with ``per_element`` judged without them is an error.
    """
    if (elements is None) != (tolerance.per_element is None):
        raise ValueError(f"output {stats.output!r}: the tolerance "
                         + ("declares an element bound: pass its measure" if elements is None
                            else "declares no element bound, but a measure was given"))
    if calibration is not None and tolerance.calibrated is None:
        raise ValueError(f"output {stats.output!r}: a calibration was given but the "
                         "tolerance declares no calibrated judge")
    problems = contract_problems(stats, nonfinite_reference_ok=nonfinite_reference_ok)
    if calibration is not None:
        c = calibration
        where = "globally" if c.worst_where == "global" else f"in slice {c.worst_where}"
        if not c.passed:
            problems.append(
                f"calibrated: rel err {c.worst_kernel_err:.3g} > {c.multiple:g} x "
                f"low-precision err {c.worst_lowp_err:.3g} + {c.floor:.3g} {where} "
                f"(kernel/low-precision ratio {_ratio(c.worst_kernel_err, c.worst_lowp_err)}; "
                f"global rel err {c.kernel_rel_err:.3g} vs low-precision {c.lowp_rel_err:.3g})"
            )
    else:
        problems += bound_problems(stats, tolerance.max_rel_err)
    if elements is not None and not elements.passed:
        problems.append(elements.problem())
    return Verdict(stats=stats, tolerance=tolerance, passed=not problems,
                   problems=tuple(problems), calibration=calibration, elements=elements)


def _ratio(kernel: float, lowp: float) -> str:
    return f"{kernel / lowp:.3g}" if lowp > 0 else "inf (low-precision err 0)"


@dataclasses.dataclass(frozen=True, kw_only=True)
class ToleranceOverride:
    """One ``--tolerance OUTPUT[:DTYPE]=X``: a new limit for one output (at one dtype,
    or at every dtype when ``dtype`` is None)."""

    output: str
    dtype: str | None
    max_rel_err: float

    def __str__(self) -> str:
        key = self.output if self.dtype is None else f"{self.output}:{self.dtype}"
        return f"{key}={self.max_rel_err:g}"


def merge_tolerances(
    table: ToleranceTable, overrides: Sequence[ToleranceOverride] = (), scale: float | None = None
) -> ToleranceTable:
    """The family's defaults, multiplied by ``scale``, then replaced by ``overrides``
    (later ones win); each changed entry's reason names the default it replaced.

    Only ``max_rel_err`` changes (an entry's per-slice floor is kept); ``scale`` also
    multiplies a calibrated judge's ``multiple`` and an element bound's ``ulps`` and
    ``floor``, and an override replaces a calibrated judge and an element bound by the
    fixed bound it names.
    Pure: ``table`` is not changed. An override naming an output or dtype the table
    does not have, a non-positive scale, or no matching entry is a ValueError.
    """
    if scale is not None and not scale > 0:
        raise ValueError(f"tolerance scale must be positive, got {scale}")
    entries = dict(table.entries)
    if scale is not None:
        entries = {
            key: dataclasses.replace(
                tol,
                max_rel_err=min(tol.max_rel_err * scale, 0.999),
                calibrated=None if tol.calibrated is None else dataclasses.replace(
                    tol.calibrated, multiple=min(tol.calibrated.multiple * scale, 100.0)),
                per_element=None if tol.per_element is None else dataclasses.replace(
                    tol.per_element, ulps=tol.per_element.ulps * scale,
                    floor=min(tol.per_element.floor * scale, 0.099)),
                reason=f"--tolerance-scale {scale:g} x default {tol.max_rel_err:g} ({tol.reason})",
            )
            for key, tol in entries.items()
        }
    outputs = sorted({o for _, o in table.entries})
    dtypes = sorted({d for d, _ in table.entries})
    for ov in overrides:
        if ov.output not in outputs:
            raise ValueError(f"--tolerance {ov}: no output {ov.output!r}; outputs: {outputs}")
        if ov.dtype is not None and ov.dtype not in dtypes:
            raise ValueError(f"--tolerance {ov}: no dtype {ov.dtype!r}; dtypes: {dtypes}")
        keys = [k for k in entries if k[1] == ov.output and ov.dtype in (None, k[0])]
        if not keys:
            raise ValueError(f"--tolerance {ov}: the table has no such entry")
        for key in keys:
            default = table.entries[key]
            entries[key] = dataclasses.replace(
                entries[key],
                max_rel_err=ov.max_rel_err,
                calibrated=None,
                per_element=None,
                reason=f"--tolerance {ov} (default {default.max_rel_err:g}: {default.reason})",
            )
    return ToleranceTable(entries)
