"""Tolerance tables and judge(): data lookups and the pass/fail decision."""

import numpy as np
import pytest

from kernel_harness.core.compare import compare
from kernel_harness.core.tolerance import (
    FLOAT32_FLOOR as F32,
)
from kernel_harness.core.tolerance import LOW_PRECISION_FLOOR as LOW
from kernel_harness.core.tolerance import (
    SliceFloor,
    Tolerance,
    ToleranceTable,
    judge,
)

AXES = ("query", "dim")


def _stats(err: float, *, nan: bool = False):
    e = np.ones((4, 8), np.float32)
    a = e.copy()
    a[1, 2] += err
    if nan:
        a[3, 3] = np.nan
    return compare(a, e, output="out", axes=AXES, mismatch_threshold_rel=1e-4)


def test_lookup_by_dtype_and_output():
    table = ToleranceTable({("float32", "out"): Tolerance(max_rel_err=1e-4, slice_floor=F32)})
    assert table.lookup("float32", "out").max_rel_err == 1e-4
    with pytest.raises(KeyError, match="no tolerance for dtype='bfloat16' output='out'"):
        table.lookup("bfloat16", "out")


def test_tolerance_must_be_a_fraction():
    with pytest.raises(ValueError, match="max_rel_err must be in"):
        Tolerance(max_rel_err=0.0, slice_floor=F32)


def test_within_tolerance_passes_and_above_fails():
    tol = Tolerance(max_rel_err=1e-4, slice_floor=F32)
    assert judge(_stats(5e-5), tol).passed
    verdict = judge(_stats(3e-3), tol)
    assert not verdict.passed
    assert "max rel err 0.003 > tolerance 0.0001" in verdict.problems[0]


def test_float32_tolerance_catches_bfloat16_pv_level_error():
    # A bf16 PV product gives relative errors of about 3e-3: it must fail at float32.
    table = ToleranceTable({("float32", "out"): Tolerance(max_rel_err=5e-4, slice_floor=F32)})
    assert not judge(_stats(3e-3), table.lookup("float32", "out")).passed


def test_nan_fails_even_inside_tolerance():
    verdict = judge(_stats(0.0, nan=True), Tolerance(max_rel_err=0.5, slice_floor=F32))
    assert not verdict.passed
    assert any("1 NaN not in the reference" in p for p in verdict.problems)


def test_merge_tolerances_scale_then_overrides_pure_and_explained():
    from kernel_harness.core.tolerance import ToleranceOverride, merge_tolerances

    table = ToleranceTable({
        ("float32", "out"): Tolerance(max_rel_err=1e-4, slice_floor=F32, reason="f32"),
        ("bfloat16", "out"): Tolerance(max_rel_err=1e-2, slice_floor=LOW, reason="bf16"),
        ("float32", "dq"): Tolerance(max_rel_err=2e-4, slice_floor=F32, reason="f32 dq"),
    })
    merged = merge_tolerances(
        table, [ToleranceOverride(output="out", dtype="bfloat16", max_rel_err=0.03)], scale=3
    )
    assert merged.lookup("bfloat16", "out").max_rel_err == 0.03
    assert "default 0.01: bf16" in merged.lookup("bfloat16", "out").reason
    assert merged.lookup("float32", "out").max_rel_err == pytest.approx(3e-4)
    assert "--tolerance-scale 3" in merged.lookup("float32", "dq").reason
    assert table.lookup("bfloat16", "out").max_rel_err == 1e-2  # the input is untouched
    own = SliceFloor(0.25, "a declared floor")
    floored = ToleranceTable({("float32", "dq"): Tolerance(max_rel_err=2e-4, slice_floor=own)})
    assert merge_tolerances(floored, scale=2).lookup("float32", "dq").slice_floor == own
    replaced = merge_tolerances(floored, [ToleranceOverride(output="dq", dtype=None,
                                                            max_rel_err=0.1)])
    assert replaced.lookup("float32", "dq").slice_floor == own  # an override keeps the floor
    assert merge_tolerances(floored, scale=1e4).lookup("float32", "dq").max_rel_err == 0.999
    every_dtype = merge_tolerances(table, [ToleranceOverride(output="out", dtype=None,
                                                             max_rel_err=0.5)])
    assert {every_dtype.lookup(d, "out").max_rel_err for d in ("float32", "bfloat16")} == {0.5}
    assert every_dtype.lookup("float32", "dq").max_rel_err == 2e-4
    with pytest.raises(ValueError, match="no output 'dk'"):
        merge_tolerances(table, [ToleranceOverride(output="dk", dtype=None, max_rel_err=0.1)])
    with pytest.raises(ValueError, match="no such entry"):
        merge_tolerances(table, [ToleranceOverride(output="dq", dtype="bfloat16",
                                                   max_rel_err=0.1)])
    with pytest.raises(ValueError, match="scale must be positive"):
        merge_tolerances(table, scale=0)


def test_non_finite_reference_and_empty_comparison_fail():
    e = np.ones((2, 2))
    e[1, 1] = np.nan
    tol = Tolerance(max_rel_err=1e-4, slice_floor=F32)
    s = compare(e.copy(), e, output="out", axes=("query", "dim"))
    verdict = judge(s, tol)
    assert not verdict.passed and "HARNESS ERROR" in verdict.problems[0]
    assert "query=1 dim=1" in verdict.problems[0]
    assert judge(s, tol, nonfinite_reference_ok=True).passed
    none = compare(e, e, output="out", axes=("query", "dim"), valid=np.zeros((2, 2), bool))
    assert "no element compared" in judge(none, tol).problems[0]


def test_slice_check_fails_what_the_global_check_passes():
    e = np.ones((2, 8))
    e[1] = 0.01
    a = e.copy()
    a[1, 3] *= 1.01
    s = compare(a, e, output="dsinks", axes=("head", "dim"), slice_floor=1e-3)
    verdict = judge(s, Tolerance(max_rel_err=2e-3, slice_floor=F32))
    assert s.max_rel_err < 2e-3 and not verdict.passed
    assert "slice rel err 0.01 > tolerance 0.002 in slice head=1" in verdict.problems[0]
