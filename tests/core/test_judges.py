"""Judges as objects (core.judges): each binds one tolerance to the measuring and deciding
code, and names itself (the text ``kernel-harness describe`` prints). A ``--tolerance`` is
core.tolerance.merge_tolerances, tested in test_tolerance.py and test_calibrate.py."""

from __future__ import annotations

import numpy as np
import pytest

from kernel_harness.core.judges import CalibratedJudge, FixedJudge, judge_for
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
    j = judge_for(FIXED)
    m = j.measure(bad, ref, output="out", axes=AXES)
    assert m.stats.slice_floor == LOW_PRECISION_FLOOR.fraction and m.calibration is None
    v = j.verdict(m)
    assert not v.passed and v.problems[0].startswith("slice rel err")
    assert j.verdict(j.measure(ref, ref, output="out", axes=AXES)).passed
    # Another declared floor is another judge: a floor of 1 sees only the global 0.25%.
    coarse = FixedJudge(Tolerance(max_rel_err=1e-2, slice_floor=SliceFloor(1.0, "global")))
    assert coarse.verdict(coarse.measure(bad, ref, output="out", axes=AXES)).passed


def test_calibrated_judge_needs_the_low_precision_computation_and_uses_it():
    ref, lowp = _data()
    j = judge_for(CALIBRATED)
    with pytest.raises(ValueError, match="low-precision computation"):
        j.measure(ref, ref, output="out", axes=AXES)
    good = j.measure(lowp, ref, output="out", axes=AXES, lowp=lowp)
    assert good.calibration is not None and j.verdict(good).judged_by == "calibrated"
    assert j.verdict(good).passed
    worse = ref + 10 * (lowp - ref)  # 10x the yardstick's error: under the fixed 1.5e-2
    m = j.measure(worse, ref, output="out", axes=AXES, lowp=lowp)
    assert m.stats.max_rel_err < CALIBRATED.max_rel_err
    v = j.verdict(m)
    assert not v.passed and v.problems[0].startswith("calibrated: rel err")


def test_describe_is_the_judge_column_of_kernel_harness_describe():
    assert judge_for(FIXED).describe() == "fixed"
    assert judge_for(CALIBRATED).describe() == "calibrated 2x + 0.00391"
