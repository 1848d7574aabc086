"""The calibrated judge's measure and verdict (core.calibrate, core.tolerance): the kernel's
error against a multiple of a low-precision computation's error, globally and per slice."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kernel_harness.core.calibrate import measure_calibrated
from kernel_harness.core.compare import compare
from kernel_harness.core.tolerance import (
    FLOAT32_FLOOR as F32,
)
from kernel_harness.core.tolerance import (
    LOW_PRECISION_FLOOR,
    Calibrated,
    Tolerance,
    ToleranceOverride,
    ToleranceTable,
    judge,
    merge_tolerances,
)

AXES = ("row", "dim")
CAL = Calibrated(multiple=2.0, floor=2.0**-8, reason="test")
TOL = Tolerance(max_rel_err=1.5e-2, reason="fixed", calibrated=CAL,
                slice_floor=LOW_PRECISION_FLOOR)


def _data(seed: int = 0):
    rng = np.random.default_rng(seed)
    ref = rng.standard_normal((16, 64))
    lowp = ref * (1 + 4e-3 * rng.standard_normal(ref.shape))  # a bf16-like yardstick
    return ref, lowp


def _measure(actual, lowp, ref, **kw):
    return measure_calibrated(actual, lowp, ref, output="out", axes=AXES, multiple=2.0,
                              floor=2.0**-8, slice_floor=1 / 16, **kw)


def test_a_kernel_as_accurate_as_the_yardstick_passes_with_its_ratio():
    ref, lowp = _data()
    kernel = ref * (1 + 4e-3 * np.random.default_rng(1).standard_normal(ref.shape))
    c = _measure(kernel, lowp, ref)
    assert c.passed and c.usage < 1
    assert 0.3 < c.ratio < 3  # errors of the same size
    assert c.lowp_rel_err > 0 and c.kernel_rel_err > 0


def test_one_slice_five_times_the_yardstick_fails_and_is_named():
    ref, lowp = _data()
    kernel = ref.copy()
    kernel[5] *= 1.03  # 3% in row 5 only: ~5x the yardstick's error there
    c = _measure(kernel, lowp, ref)
    assert not c.passed and c.worst_where == "row=5"
    assert c.worst_kernel_err == pytest.approx(0.03, rel=0.05)
    v = judge(compare(kernel, ref, output="out", axes=AXES, slice_floor=1 / 16), TOL,
              calibration=c)
    assert not v.passed and v.judged_by == "calibrated"
    (problem,) = v.problems
    assert problem.startswith("calibrated: rel err 0.03") and "in slice row=5" in problem
    assert "kernel/low-precision ratio" in problem
    assert v.usage == c.usage > 1


def test_the_calibrated_judge_replaces_the_fixed_bound():
    # An error the fixed table (1.5e-2) rejects passes where the yardstick errs as much:
    # the case is badly conditioned for any low-precision computation.
    ref, _ = _data()
    lowp = ref * 1.02
    kernel = ref * 1.025
    stats = compare(kernel, ref, output="out", axes=AXES, slice_floor=1 / 16)
    assert not judge(stats, TOL).passed  # fixed
    v = judge(stats, TOL, calibration=_measure(kernel, lowp, ref))
    assert v.passed and v.problems == () and v.usage < 1


def test_holes_stay_failures_under_the_calibrated_judge():
    ref, lowp = _data()
    kernel = ref.copy()
    kernel[2, 3] = np.nan
    c = _measure(kernel, lowp, ref)
    assert not c.passed and math.isinf(c.usage)
    v = judge(compare(kernel, ref, output="out", axes=AXES), TOL, calibration=c)
    assert "1 NaN not in the reference" in v.problems
    # Nothing compared is a failure even though no error is measured.
    none = np.zeros(ref.shape, bool)
    c = _measure(ref, lowp, ref, valid=none)
    v = judge(compare(ref, ref, output="out", axes=AXES, valid=none), TOL, calibration=c)
    assert not v.passed and v.problems[0].startswith("no element compared")


def test_exact_yardstick_leaves_the_floor():
    # A slice the yardstick gets exactly right (a row that sees one key) still allows
    # one bfloat16 rounding (the floor), and no more than about twice that.
    ref, _ = _data()
    kernel = ref * (1 + 2.0**-9)
    assert _measure(kernel, ref, ref).passed
    assert not _measure(ref * (1 + 2.0**-7), ref, ref).passed


def test_a_calibration_without_a_declared_calibrated_judge_is_an_error():
    ref, lowp = _data()
    with pytest.raises(ValueError, match="declares no calibrated judge"):
        judge(compare(ref, ref, output="out", axes=AXES),
              Tolerance(max_rel_err=0.01, slice_floor=F32), calibration=_measure(ref, lowp, ref))


def test_overrides_replace_and_scales_multiply_the_calibrated_judge():
    table = ToleranceTable({("bfloat16", "out"): TOL})
    over = merge_tolerances(table, [ToleranceOverride(output="out", dtype=None,
                                                      max_rel_err=0.05)])
    assert over.lookup("bfloat16", "out").calibrated is None  # the named fixed bound rules
    scaled = merge_tolerances(table, scale=2.0)
    assert scaled.lookup("bfloat16", "out").calibrated.multiple == 4.0


def test_bad_calibrated_numbers_are_errors():
    with pytest.raises(ValueError, match="multiple"):
        Calibrated(multiple=0.0, floor=0.01, reason="")
    with pytest.raises(ValueError, match="floor"):
        Calibrated(multiple=2.0, floor=0.5, reason="")
