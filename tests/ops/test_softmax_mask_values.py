"""Masked logits are -inf or the finite sentinels frameworks mask with (the dtype's most
negative value, -1e9), and some rows sit at a sentinel's level beside -inf lanes: round 4
of the adversarial set passed a softmax that turned -inf into -1e9 (such a row then gives
its -inf lanes probability). ci-sized draws reach both, the reference and the shift
relation stay exact on them, and the case refuses a sentinel its dtype cannot hold."""

from __future__ import annotations

import numpy as np
import pytest

from kernel_harness import get_family
from kernel_harness.ops.softmax.cases import SoftmaxCase
from kernel_harness.ops.softmax.reference import softmax
from tests.helpers.mode_reach import assert_reaches, reach

EVENTS = ("mask=finfo-min", "mask=-1e9", "sentinel-level-row-beside-masks")


def _events(case: SoftmaxCase) -> list[str]:
    ev = []
    if case.masked_lanes().any():
        if case.mask_value != "-inf":
            ev.append(f"mask={case.mask_value}")
        if case.offset <= -5e4:
            ev.append("sentinel-level-row-beside-masks")
    return ev


def test_ci_sized_draws_reach_finite_sentinels_and_sentinel_level_rows():
    assert_reaches(reach(get_family("gpu-softmax").cases(), _events, runs=5), EVENTS,
                   "gpu-softmax")


@pytest.mark.parametrize("dtype, value, fill", [
    ("float32", "finfo-min", np.finfo(np.float32).min), ("float32", "-1e9", -1e9),
    ("float16", "finfo-min", np.finfo(np.float16).min), ("bfloat16", "-inf", -np.inf)])
def test_masked_lanes_hold_the_sentinel_and_get_no_probability(dtype, value, fill):
    level = dtype == "float32" and value == "finfo-min"  # a row at -1e9 beside the mask
    case = SoftmaxCase(dtype=dtype, seed=3, leading=(2,), n=6, masked_prefix=2,
                       mask_value=value, offset=-1e9 if level else 0.0)
    x = case.materialize()["x"]
    assert np.all(x[:, :2].astype(np.float64) == np.float64(fill))
    p = softmax(x)
    assert np.all(p[:, :2] == 0) and np.allclose(p.sum(-1), 1)
    if level:  # its logits all round to -1e9: uniform over its kept lanes
        assert np.allclose(p[:, 2:], 0.25)


def test_a_sentinel_its_dtype_cannot_hold_is_refused():
    with pytest.raises(ValueError, match="-1e9 is -inf in float16"):
        SoftmaxCase(dtype="float16", seed=0, leading=(), n=4, masked_prefix=1,
                    mask_value="-1e9")
    with pytest.raises(ValueError, match="mask_value must be one of"):
        SoftmaxCase(dtype="float32", seed=0, leading=(), n=4, mask_value="-big")
