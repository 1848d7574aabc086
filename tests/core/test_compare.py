"""compare(): the measured statistics, on arrays whose answers are known by hand."""

import math

import numpy as np
import pytest

from kernel_harness.core.compare import compare

AXES = ("batch", "query", "dim")


def test_identical_arrays_have_zero_error():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 5
    s = compare(x, x, output="out", axes=AXES, mismatch_threshold_rel=1e-6)
    assert s.max_abs_err == 0 and s.max_rel_err == 0 and s.mismatch_fraction == 0
    assert s.compared == 24 and s.scale == 18.0


def test_worst_index_named_by_axis_and_relative_to_scale():
    e = np.zeros((2, 3, 4), np.float32)
    e[0, 0, 0] = -4.0  # the scale is the largest reference magnitude
    a = e.copy()
    a[1, 2, 3] = 0.5
    a[0, 1, 1] = 0.1
    s = compare(a, e, output="dq", axes=AXES, mismatch_threshold_rel=0.05)
    assert s.worst_index == (1, 2, 3)
    assert s.worst_location == "batch=1 query=2 dim=3"
    assert s.max_abs_err == pytest.approx(0.5)
    assert s.max_rel_err == pytest.approx(0.5 / 4.0)
    assert (s.worst_actual, s.worst_expected) == (pytest.approx(0.5), 0.0)
    # errors 0.5 and 0.1 both exceed 0.05 * 4 = 0.2? only 0.5 does.
    assert s.mismatch_fraction == pytest.approx(1 / 24)


def test_nan_in_kernel_output_is_an_infinite_error_and_counted():
    e = np.ones((1, 2, 2), np.float32)
    a = e.copy()
    a[0, 1, 0] = np.nan
    a[0, 0, 1] = np.inf
    s = compare(a, e, output="out", axes=AXES)
    assert s.nan_actual == 1 and s.inf_actual == 1 and s.nan_expected == 0
    assert math.isinf(s.max_abs_err) and math.isinf(s.max_rel_err)
    assert s.worst_index in {(0, 1, 0), (0, 0, 1)}


def test_invalid_elements_are_not_compared():
    e = np.ones((1, 2, 2), np.float32)
    a = e.copy()
    a[0, 1, :] = 100.0
    valid = np.array([True, False])[None, :, None]
    s = compare(a, e, output="out", axes=AXES, valid=valid)
    assert s.max_abs_err == 0 and s.compared == 2


def test_shape_mismatch_is_a_clear_error():
    with pytest.raises(ValueError, match=r"kernel shape \(2,\) != reference shape \(3,\)"):
        compare(np.zeros(2), np.zeros(3), output="out", axes=("query",))


def test_axis_names_must_match_rank():
    with pytest.raises(ValueError, match="2 axis names for 1 dims"):
        compare(np.zeros(2), np.zeros(2), output="out", axes=("a", "b"))


def test_non_finite_values_are_compared_by_position():
    e = np.array([np.nan, np.inf, -np.inf, 1.0])
    same = compare(e.copy(), e, output="out", axes=("query",))
    assert same.max_abs_err == 0 and same.nonfinite_expected == 3
    # A kernel NaN against a reference -inf, and a NaN moved to another place: infinite.
    a = np.array([np.nan, np.inf, np.nan, 1.0])
    assert math.isinf(compare(a, e, output="out", axes=("query",)).max_abs_err)
    b = np.array([1.0, np.inf, -np.inf, np.nan])
    s = compare(b, e, output="out", axes=("query",))
    assert math.isinf(s.max_abs_err) and s.worst_index in {(0,), (3,)}


def test_slice_error_is_relative_to_its_own_slice_with_a_floor():
    e = np.ones((2, 4, 8))
    e[1] *= 0.01  # head 1 is 100x smaller than head 0
    a = e.copy()
    a[1, 2, :] *= 1.05  # 5% off in one row of the small head
    axes = ("head", "query", "dim")
    s = compare(a, e, output="out", axes=axes, slice_floor=1e-3)
    assert s.max_rel_err == pytest.approx(5e-4)
    assert s.slice_rel_err == pytest.approx(0.05)
    assert s.worst_slice == (1, 2) and s.worst_slice_location == "head=1 query=2"
    assert s.worst_slice_scale == pytest.approx(0.01)
    # The floor: a slice below floor x global is judged as if it were that large.
    floored = compare(a, e, output="out", axes=axes, slice_floor=0.1)
    assert floored.slice_rel_err == pytest.approx(0.05 * 0.01 / 0.1)


def test_slice_axes_default_to_all_but_dim_and_rows_of_query_key_outputs():
    from kernel_harness.core.compare import derive_slice_axes

    assert derive_slice_axes(("batch", "head", "query", "dim")) == ("batch", "head", "query")
    assert derive_slice_axes(("batch", "head", "query", "key")) == ("batch", "head", "query")
    assert derive_slice_axes(("head",)) == ("head",)


def test_magnitude_scales_a_cancelling_sum_by_its_terms():
    """A sum of terms of size 60 that cancels to 0.16 is judged against 60: a rounding-
    sized miss passes, a dropped result (0 for 0.16) still shows as 0.16 / 60."""
    expected = np.array([0.16])
    near = compare(np.array([0.142]), expected, output="dsinks", axes=("head",),
                   magnitude=np.array([60.0]))
    assert near.max_rel_err == pytest.approx(0.018 / 60)
    dropped = compare(np.array([0.0]), expected, output="dsinks", axes=("head",),
                      magnitude=np.array([60.0]))
    assert dropped.max_rel_err == pytest.approx(0.16 / 60)
    plain = compare(np.array([0.142]), expected, output="dsinks", axes=("head",))
    assert plain.max_rel_err == pytest.approx(0.018 / 0.16)
