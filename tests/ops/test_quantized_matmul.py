"""The quantized matmul op (ops/quantized_matmul): the one quantization rule (int8 by the
declared rounding, float8 by the format's), cases whose every group has a power-of-two
scale, the exact reference against a plain float64 product, and the bfloat16-accumulation
twin."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from kernel_harness.ops.quantized_matmul.cases import SCALE_EXPONENTS, QmmCase
from kernel_harness.ops.quantized_matmul.quantize import QMAX, quantize
from kernel_harness.ops.quantized_matmul.reference import (
    bfloat16_product,
    exact_product,
    reference_for,
)

ROW_MAX = 127 * 2.0**-5


def test_int8_truncation_and_rounding_as_declared():
    x = np.array([[ROW_MAX, 1.0, -1.0, 0.49 * ROW_MAX / 127 * 3]], np.float32)
    q_trunc, scale = quantize(x, "int8", "toward-zero")
    q_near, _ = quantize(x, "int8", "nearest")
    assert scale[0] == 2.0**-5  # a power of two: x / scale is exact
    assert q_trunc.tolist() == [[127, 32, -32, 1]] and q_near.tolist() == [[127, 32, -32, 1]]
    y = np.array([[ROW_MAX, 0.02, -0.05]], np.float32)  # 0.64 and -1.6 steps
    assert quantize(y, "int8", "toward-zero")[0].tolist() == [[127, 0, -1]]
    assert quantize(y, "int8", "nearest")[0].tolist() == [[127, 1, -2]]
    with pytest.raises(ValueError, match="rounding must be one of"):
        reference_for("stochastic")
    with pytest.raises(ValueError, match="quantized dtype must be one of"):
        quantize(y, "int4")


def test_float8_rounds_to_nearest_even_whatever_the_option():
    peak = QMAX["float8_e4m3fn"] * 2.0**-5
    x = np.array([[peak, 17.0 * 2**-5, 19.0 * 2**-5, 0.0]], np.float32)  # 17, 19 steps
    for rounding in ("toward-zero", "nearest"):
        q, scale = quantize(x, "float8_e4m3fn", rounding)
        assert scale[0] == 2.0**-5
        # e4m3 holds even integers from 16 to 32: 17 -> 16, 19 -> 20 (ties to even)
        assert q.tolist() == [[448.0, 16.0, 20.0, 0.0]]


@pytest.mark.parametrize("w_q_dtype,scale_block", [("int8", None), ("float8_e4m3fn", None),
                                                   ("float8_e4m3fn", 128)])
def test_every_group_has_its_own_power_of_two_scale(w_q_dtype, scale_block):
    case = QmmCase(dtype="bfloat16", seed=5, n_batch=20, n_in=256, n_out=130, batch_block=32,
                   w_q_dtype=w_q_dtype, x_q_dtype=w_q_dtype, scale_block=scale_block)
    inputs = case.materialize()
    x = inputs["x"].astype(np.float32).reshape(20, -1, case.group)
    exponents = np.log2(np.abs(x).max(axis=2) / QMAX[w_q_dtype])
    assert set(exponents.ravel()) == set(SCALE_EXPONENTS)  # exact powers of two, varied
    storage = np.int8 if w_q_dtype == "int8" else ml_dtypes.float8_e4m3fn
    assert inputs["w_q"].dtype == storage
    assert np.abs(inputs["w_q"].astype(np.float32)).max() == QMAX[w_q_dtype]
    expected_scale = (130,) if scale_block is None else (256 // scale_block, 1, 130)
    assert inputs["w_scale"].shape == expected_scale


def test_exact_product_is_the_plain_product_of_the_dequantized_operands():
    case = QmmCase(dtype="float32", seed=3, n_batch=4, n_in=256, n_out=8, in_block=128,
                   w_q_dtype="float8_e4m3fn", x_q_dtype="float8_e4m3fn", scale_block=64)
    inputs = case.materialize()
    xq, xs = quantize(inputs["x"].reshape(4, 4, 64), "float8_e4m3fn")
    w = (inputs["w_q"].astype(np.float64).reshape(8, 4, 64)
         * inputs["w_scale"][:, 0, :].T[:, :, None])
    plain = (xq * xs[..., None]).reshape(4, 256) @ w.reshape(8, 256).T
    np.testing.assert_allclose(exact_product(case, inputs, "nearest"), plain, rtol=1e-12)
    twin = bfloat16_product(case, inputs, "nearest")
    rel = np.abs(twin - plain).max() / np.abs(plain).max()
    assert 2.0**-12 < rel < 2.0**-6, rel  # bfloat16 accumulation: visible, bounded


def test_invalid_cases_say_what_is_wrong():
    with pytest.raises(ValueError, match="x_q_dtype must be w_q_dtype"):
        QmmCase(dtype="float32", seed=0, n_batch=8, n_in=128, n_out=128,
                x_q_dtype="float8_e4m3fn", w_q_dtype="int8")
    with pytest.raises(ValueError, match="must divide n_in"):
        QmmCase(dtype="float32", seed=0, n_batch=8, n_in=200, n_out=128, scale_block=128)
