"""tpu-inference's quantized matmul (issue 37): the op's reference quantizes as the
contract declares, the pristine kernel passes, the rounding it does (truncation) is told
from the rounding its own package's tests assume (to nearest). (Loading without vLLM, and
the listing without tpu-inference: tests/families/test_tpu_inference_loader.py.)"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kernel_harness.core.backends import resolve_backend
from kernel_harness.ops.quantized_matmul.cases import ROW_MAX, QmmCase
from kernel_harness.ops.quantized_matmul.reference import quantize_rows, reference_for
from kernel_harness.run.runner import check_case
from kernel_harness.spec.registry import get_family
from tests.helpers.libraries import tpu_inference_installed_or_skip

NAME = "tpu-inference-quantized-matmul"


def test_truncation_and_rounding_as_declared():
    x = np.array([[ROW_MAX, 1.0, -1.0, 0.49 * ROW_MAX / 127 * 3]], np.float32)
    q_trunc, scale = quantize_rows(x, "toward-zero")
    q_near, _ = quantize_rows(x, "nearest")
    assert scale[0] == 2.0**-5  # a power of two: x / scale is exact
    assert q_trunc.tolist() == [[127, 32, -32, 1]] and q_near.tolist() == [[127, 32, -32, 1]]
    y = np.array([[ROW_MAX, 0.02, -0.05]], np.float32)  # 0.64 and -1.6 steps
    assert quantize_rows(y, "toward-zero")[0].tolist() == [[127, 0, -1]]
    assert quantize_rows(y, "nearest")[0].tolist() == [[127, 1, -2]]
    with pytest.raises(ValueError, match="rounding must be one of"):
        reference_for("stochastic")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_every_row_has_a_power_of_two_scale(dtype):
    case = QmmCase(dtype=dtype, seed=5, n_batch=20, n_in=300, n_out=130, batch_block=32)
    x = case.materialize()["x"].astype(np.float32)
    assert (np.abs(x).max(axis=1) == ROW_MAX).all()
    w = case.materialize()
    assert w["w_q"].dtype == np.int8 and np.abs(w["w_q"]).max() == 127


def test_the_pristine_kernel_passes_and_rounding_to_nearest_is_seen():
    """The finding: the kernel truncates. Judged as truncating it matches bit for bit in
    float32 (and within bfloat16's output rounding); judged as rounding to nearest (the
    package's own test reference) it is off by about 1e-2 of the output's scale."""
    tpu_inference_installed_or_skip()
    family, backend = get_family(NAME), resolve_backend("interpret")
    nearest = dataclasses.replace(family, reference=reference_for("nearest"))
    for case in family.seed_cases(frozenset()):
        ok = check_case(family, case, backend)
        assert ok.passed, [v.problems for v in ok.verdicts]
        worst = max(v.stats.max_rel_err for v in ok.verdicts)
        assert worst <= (0.0 if case.dtype == "float32" else 4e-3), worst
        off = check_case(nearest, case, backend)
        assert not off.passed
        assert max(v.stats.max_rel_err for v in off.verdicts) > 5e-3


def test_only_tilings_that_lower_for_tpu_are_cases():
    """lowers-for-tpu found it: the kernel's row-max block (1, batch_block) lowers only
    when batch_block is a multiple of 128 or covers the whole batch."""
    QmmCase(dtype="float32", seed=0, n_batch=20, n_in=128, n_out=128, batch_block=32)
    QmmCase(dtype="float32", seed=0, n_batch=200, n_in=128, n_out=128, batch_block=128)
    with pytest.raises(ValueError, match="lowers for TPU only when"):
        QmmCase(dtype="float32", seed=0, n_batch=20, n_in=128, n_out=128, batch_block=8)

