"""Judges as objects (core.judges): each binds one tolerance to the measuring and deciding
code, and names itself (the text ``kernel-harness describe`` prints). A ``--tolerance`` is
core.tolerance.merge_tolerances, tested in test_tolerance.py and test_calibrate.py."""

from __future__ import annotations

import numpy as np
import pytest

from kernel_harness.core.judges import (
    CalibratedJudge,
    FixedJudge,
    JudgedOutput,
    judge_for,
    judge_output,
)
from kernel_harness.core.tolerance import (
    LOW_PRECISION_FLOOR,
    Calibrated,
    SliceFloor,
    Tolerance,
)

AXES = ("row", "dim")
CAL = Calibrated(multiple=2.0, floor=2.0**-8, reason="FlashAttention's multiple")
FIXED = Tolerance(max_rel_err=1e-2, reason="one bf16 rounding", slice_floor=LOW_PRECISION_FLOOR)
CALIBRATED = Tolerance(max_rel_err=1.5e-2, reason="fixed fallback", calibrated=CAL,
                       slice_floor=LOW_PRECISION_FLOOR)


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((8, 16))
    return ref, ref * (1 + rng.uniform(-1e-3, 1e-3, ref.shape))  # a 1e-3 yardstick


def _out(tolerance: Tolerance, **kw) -> JudgedOutput:
    return JudgedOutput(name="out", reference="out", axes=AXES, tolerance=tolerance, **kw)


def test_judge_for_picks_the_declared_judge():
    assert isinstance(judge_for(FIXED), FixedJudge)
    assert isinstance(judge_for(CALIBRATED), CalibratedJudge)
    with pytest.raises(ValueError, match="declares `calibrated`"):
        CalibratedJudge(FIXED)


def test_fixed_judge_measures_with_its_own_floor_and_decides():
    ref = np.ones((2, 8))
    ref[1] = 0.05  # a slice at 1/20 of the global scale
    bad = ref.copy()
    bad[1] *= 1.05  # 5% in that slice: 0.25% of the global scale
    out = _out(FIXED)
    j = out.judge
    assert isinstance(j, FixedJudge)
    m = j.measure(bad, ref, out)
    assert m.stats.slice_floor == LOW_PRECISION_FLOOR.fraction and m.calibration is None
    v = j.verdict(m, out)
    assert not v.passed and v.problems[0].startswith("slice rel err")
    assert judge_output(out, ref, ref).passed
    # Another declared floor is another judge: a floor of 1 sees only the global 0.25%.
    coarse = _out(Tolerance(max_rel_err=1e-2, slice_floor=SliceFloor(1.0, "global")))
    assert judge_output(coarse, bad, ref).passed


def test_calibrated_judge_needs_the_low_precision_computation_and_uses_it():
    ref, lowp = _data()
    out = _out(CALIBRATED)
    j = out.judge
    with pytest.raises(ValueError, match="low-precision computation"):
        j.measure(ref, ref, out)
    good = j.measure(lowp, ref, out, lowp=lowp)
    assert good.calibration is not None and j.verdict(good, out).judged_by == "calibrated"
    assert j.verdict(good, out).passed
    worse = ref + 10 * (lowp - ref)  # 10x the yardstick's error: under the fixed 1.5e-2
    m = j.measure(worse, ref, out, lowp=lowp)
    assert m.stats.max_rel_err < CALIBRATED.max_rel_err
    v = j.verdict(m, out)
    assert not v.passed and v.problems[0].startswith("calibrated: rel err")


def test_describe_is_the_judge_column_of_kernel_harness_describe():
    assert judge_for(FIXED).describe() == "fixed"
    assert judge_for(CALIBRATED).describe() == "calibrated 2x + 0.00391"


def test_the_record_carries_mask_slices_and_nonfinite_rule_to_the_judge():
    """What a family says of an output reaches the measurement through the record: the
    contract's mask (an excluded element's error is not seen), the slice axes (a bad column
    slice is seen per slice only when slices run along it), non-finite reference values
    allowed by position."""
    ref = np.ones((2, 8))
    ref[:, 7] = 0.05
    bad = ref.copy()
    bad[:, 7] *= 1.1  # 0.005: half the bound of the rows' scale, 10% of the column's
    assert judge_output(_out(FIXED), bad, ref).passed  # slices are rows by default
    by_column = _out(FIXED, slice_axes=("dim",))
    assert not judge_output(by_column, bad, ref).passed
    bad[:, 7] *= 2  # 0.06: over the bound everywhere, unless the contract masks it
    keep = np.ones((2, 8), bool)
    keep[:, 7] = False
    masked = _out(FIXED, valid=keep)
    assert not judge_output(_out(FIXED), bad, ref).passed
    assert judge_output(masked, bad, ref).passed and masked.excluded((2, 8)) == 2
    extra = JudgedOutput(name="out_vjp", reference="out", axes=AXES, tolerance=FIXED,
                         valid=keep)
    assert extra.excluded((2, 8)) == 0  # counted once, on the reference output
    ref_inf = ref.copy()
    ref_inf[0, 0] = -np.inf
    got = ref_inf.copy()
    assert not judge_output(_out(FIXED), got, ref_inf).passed
    assert judge_output(_out(FIXED, nonfinite_reference_ok=True), got, ref_inf).passed
