"""finite-out scales the logit input by a drawn factor, never past what the input's dtype
holds: a float16 softmax row of logits in the thousands scaled by 8 is no longer finite, and
the relation used to report its own draw as an ERROR (found by a random-seed dev check of
gpu-softmax from the wheel, 2026-12-02)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from kernel_harness.checks.metamorphic.relations import LOGIT_FACTORS, largest_finite_factor
from kernel_harness.ops.softmax.cases import SoftmaxCase
from tests.families.paged_decode.helpers import passes

#: The case the random-seed check drew (seed 3, 20th example): |logits| up to about 3e3.
LOUD_FLOAT16 = SoftmaxCase(dtype="float16", seed=1, leading=(2, 3), n=128, offset=0.0,
                           scale=3000.0)


def test_the_factor_shrinks_to_what_the_dtype_holds():
    f16 = np.array([3000.0, -2500.0], np.float16)
    assert largest_finite_factor(f16, 32.0) == 8.0  # 3000 x 8 = 24000 <= 65504 / 2
    assert largest_finite_factor(np.array([5000.0], np.float16), 32.0) == 1.0
    assert largest_finite_factor(np.array([3000.0], np.float32), 32.0) == 32.0
    bf16 = np.array([1e30], ml_dtypes.bfloat16)
    assert largest_finite_factor(bf16, 8.0) == 8.0
    assert largest_finite_factor(np.array([1.0], np.float16), 1.0) == 1.0
    assert set(LOGIT_FACTORS) >= {1.0, 8.0, 32.0}


@pytest.mark.triton_ops
def test_finite_out_on_loud_float16_logits_passes():
    inputs = LOUD_FLOAT16.materialize()
    assert max(float(np.max(np.abs(np.asarray(v, np.float32)))) for v in inputs.values()) > 2048
    passes("gpu-softmax", "finite-out", [LOUD_FLOAT16], max_examples=8)
