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
