"""Each element judged by its own size (core.elements): a tail flushed to zero or a second
rounding stays inside the row-scaled bounds and fails the element bound; what a correct
kernel does (one rounding, subnormals flushed, the twin's rounding) passes it."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from kernel_harness.core.elements import ElementBound, measure_elements, ulp
from kernel_harness.core.judges import JudgedOutput, judge_output
from kernel_harness.core.tolerance import (
    FLOAT32_FLOOR,
    LOW_PRECISION_FLOOR,
    Calibrated,
    Tolerance,
    ToleranceOverride,
    ToleranceTable,
    judge,
    merge_tolerances,
)

AXES = ("row", "dim")
ONE_ULP = ElementBound(ulps=1.0, floor=0.0, reason="rounded once")
BF16 = Tolerance(max_rel_err=1e-2, slice_floor=LOW_PRECISION_FLOOR, reason="bf16",
                 per_element=ONE_ULP)


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _bf16(x: np.ndarray) -> np.ndarray:
    return x.astype(ml_dtypes.bfloat16).astype(np.float64)


def _out(tolerance: Tolerance, dtype: str | None = "bfloat16") -> JudgedOutput:
    return JudgedOutput(name="out", reference="out", axes=AXES, tolerance=tolerance,
                        dtype=dtype)


def test_ulp_is_the_spacing_of_the_dtype_at_each_value():
    assert ulp(np.array([1.0, 1.5, 0.999, 2.0]), "bfloat16").tolist() == [
        2.0**-7, 2.0**-7, 2.0**-8, 2.0**-6]
    assert ulp(np.array([1.0]), "float32")[0] == 2.0**-23
    assert ulp(np.array([1.0]), "float16")[0] == 2.0**-10
    # below the smallest normal: the subnormals' spacing, zero included
    assert ulp(np.array([1e-6, 0.0]), "float16").tolist() == [2.0**-24, 2.0**-24]
    with pytest.raises(ValueError, match="int8"):
        ulp(np.ones(2), "int8")


def test_a_flushed_tail_passes_the_row_bound_and_fails_the_element_bound():
    x = np.random.default_rng(0).standard_normal((4, 64)) * 4
    ref = _softmax(x)
    good = _bf16(ref)
    flushed = np.where(ref < ref.max(axis=-1, keepdims=True) * 2.0**-12, 0.0, good)
    assert (flushed != good).any()
    assert judge_output(_out(BF16), good, ref).passed
    v = judge_output(_out(BF16), flushed, ref)
    assert not v.passed and len(v.problems) == 1
    assert v.problems[0].startswith("per element: 0 against ")
    assert "ulp of bfloat16 > 1 allowed" in v.problems[0]
    assert v.stats.slice_rel_err < BF16.max_rel_err  # the row bound alone passes it
    assert v.usage == v.elements.usage > 1


def test_rounding_twice_fails_once_passes():
    rng = np.random.default_rng(1)
    x, y = _bf16(rng.standard_normal((64, 32))), _bf16(rng.standard_normal((64, 32)))
    c, s = np.cos(0.3), np.sin(0.3)
    ref = x * c - y * s
    once = _bf16(ref)
    twice = _bf16(_bf16(x * c) - _bf16(y * s))
    assert judge_output(_out(BF16), once, ref).passed
    v = judge_output(_out(BF16), twice, ref)
    assert not v.passed and v.elements.over > 0 and v.elements.worst_err_ulps > 1


def test_subnormals_may_be_flushed():
    ref = np.array([[0.5, 1e-39, 3e-39, 0.5 - 4e-39]])
    flushed = _bf16(np.array([[0.5, 0.0, 0.0, 0.5]]))
    assert judge_output(_out(BF16), flushed, ref).passed


def test_the_calibrated_element_bound_adds_the_twins_error_at_the_element():
    cal = Calibrated(multiple=2.0, floor=2.0**-10, reason="twin")
    bound = ElementBound(ulps=1.0, floor=0.0, reason="twin", calibrated=True)
    tol = Tolerance(max_rel_err=1e-2, slice_floor=LOW_PRECISION_FLOOR, reason="bf16",
                    calibrated=cal, per_element=bound)
    ref = np.array([[1.0, 0.25, 0.0625]])
    u = ulp(ref, "bfloat16")
    lowp = ref + 3 * u  # the twin errs 3 ulp at every element
    small = np.array([[0.0, 0.0, 1.0]])  # the smallest element only: the row bound holds
    assert judge_output(_out(tol), ref + 7 * u * small, ref, lowp=lowp).passed  # 2 x 3 + 1
    v = judge_output(_out(tol), ref + 8 * u * small, ref, lowp=lowp)
    assert not v.passed and v.problems[-1].startswith("per element:")
    with pytest.raises(ValueError, match="calibrated judge"):
        Tolerance(max_rel_err=1e-2, slice_floor=LOW_PRECISION_FLOOR, per_element=bound)


def test_the_floor_covers_cancellation_against_the_slice():
    bound = ElementBound(ulps=1.0, floor=4 * 2.0**-24, reason="f32 under cancellation")
    tol = Tolerance(max_rel_err=1e-5, slice_floor=FLOAT32_FLOOR, reason="f32",
                    per_element=bound)
    ref = np.array([[1.0, 1e-6]])  # 1e-6: a result of cancelling terms of size 1
    noisy = ref + np.array([[0.0, 2 * 2.0**-24]])  # the terms' rounding, 2^-24 of them
    assert judge_output(_out(tol, "float32"), noisy, ref).passed
    assert not judge_output(_out(tol, "float32"), ref + np.array([[0, 8 * 2.0**-24]]),
                            ref).passed


def test_nonfinite_and_excluded_elements_are_left_to_compare():
    ref = np.array([[1.0, 2.0, 3.0]])
    got = np.array([[np.nan, 2.0, 100.0]])
    stats = measure_elements(got, ref, output="out", axes=AXES, dtype="bfloat16",
                             bound=ONE_ULP, valid=np.array([[True, True, False]]))
    assert stats.checked == 1 and stats.passed
    # ...and compare still fails the NaN
    assert not judge_output(_out(BF16), got, ref).passed


def test_an_element_bound_is_never_skipped_quietly():
    ref = np.ones((2, 2))
    with pytest.raises(ValueError, match="needs the dtype"):
        judge_output(_out(BF16, dtype=None), ref, ref)
    stats = judge_output(_out(BF16), ref, ref).stats
    with pytest.raises(ValueError, match="declares an element bound"):
        judge(stats, BF16)


def test_scale_and_override():
    table = ToleranceTable.of_limits({("bfloat16", "out"): (1e-2, "bf16")},
                                     per_element={("bfloat16", "out"): ONE_ULP})
    assert table.lookup("bfloat16", "out").per_element == ONE_ULP
    scaled = merge_tolerances(table, scale=4.0).lookup("bfloat16", "out")
    assert scaled.per_element.ulps == 4.0
    over = merge_tolerances(table, [ToleranceOverride(output="out", dtype=None,
                                                      max_rel_err=0.05)])
    assert over.lookup("bfloat16", "out").per_element is None
    with pytest.raises(ValueError, match="does not have"):
        ToleranceTable.of_limits({("bfloat16", "out"): (1e-2, "bf16")},
                                 per_element={("float32", "out"): ONE_ULP})
    assert _out(BF16).judge.describe() == "fixed; each element <= 1 ulp + 0 x slice"
