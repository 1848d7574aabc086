"""gpu-softmax draws masked (-inf) prefixes (issue 55, item 6): a softmax that returns NaN
once a whole leading 128-lane block of a row is -inf passed every property while -inf was
never drawn; it fails the ci profile now, and the real kernel passes the masked cases."""

from __future__ import annotations

import numpy as np
import pytest

from kernel_harness import testing
from kernel_harness.ops.softmax.cases import SoftmaxCase
from kernel_harness.ops.softmax.reference import reference
from kernel_harness.testing import HarnessCheckFailed

PLANTED = "tests.helpers.planted_softmax:nan_after_a_masked_block"


def test_a_masked_prefix_is_minus_inf_and_its_probabilities_zero():
    case = SoftmaxCase(dtype="bfloat16", seed=1, leading=(3,), n=300, masked_prefix=128)
    x = case.materialize()["x"]
    assert np.isneginf(x[:, :128]).all() and np.isfinite(x[:, 128:]).all()
    out = reference(case, {"x": x})["out"]
    assert (out[:, :128] == 0).all() and np.allclose(out.sum(-1), 1.0, rtol=1e-5)
    with pytest.raises(ValueError, match="needs a finite logit"):
        SoftmaxCase(dtype="float32", seed=1, leading=(), n=4, masked_prefix=4)


def test_nan_after_a_masked_leading_block_fails_the_ci_profile():
    # (which masked prefix of 128 lanes or more is met first moves with the draws)
    with pytest.raises(HarnessCheckFailed, match="masked=(12[89]|1[3-9][0-9]|[2-9][0-9]{2,})"
                                                  "[^\n]* backend=interpret: [0-9]+ NaN "
                                                  "not in the reference"):
        testing.check("gpu-softmax", impl=PLANTED, profile="ci",
                      properties=["matches-reference"], shrink_budget="0")


# Nightly: the pristine kernel; its goldens run per push.
@pytest.mark.nightly
def test_the_kernel_passes_the_ci_profile_with_masked_prefixes():
    testing.check("gpu-softmax", profile="ci", properties=["matches-reference", "finite-out",
                                                           "shift-invariant"])
