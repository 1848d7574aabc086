"""The hstu case strategy: every drawn case is valid and the hard paths are reached."""

from __future__ import annotations

import collections

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel_harness.families.hstu.family import FAMILY
from kernel_harness.ops.pointwise_attention import cases
from kernel_harness.ops.pointwise_attention.cases import HstuCase

DRAWS = settings(
    max_examples=150, deadline=None, database=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@DRAWS
@given(case=cases.hstu_cases())
def test_every_drawn_case_is_valid_and_round_trips(case):
    assert HstuCase.from_json(case.to_json()) == case
    blocks = cases.resolved_blocks(case)
    for name, whole in (("block_q", case.q_len), ("block_kv", case.kv_len),
                        ("block_q_dkv", case.q_len), ("block_kv_dkv", case.kv_len)):
        assert blocks[name] % 128 == 0 and whole % blocks[name] == 0
    assert blocks["block_kv"] % blocks["block_kv_compute"] == 0
    assert blocks["block_kv_dkv"] % blocks["block_kv_dkv_compute"] == 0
    inputs = case.materialize()
    assert inputs["q"].shape == inputs["do"].shape == (
        case.batch, case.q_len, case.q_heads, case.head_dim)
    assert inputs["k"].shape == inputs["v"].shape == (
        case.batch, case.kv_len, case.q_heads, case.head_dim)
    assert all(inputs[n].dtype == np.dtype(case.dtype) for n in ("q", "k", "v", "do"))
    if case.mask == "numpy":
        assert inputs["mask"].shape == (case.q_len, case.kv_len)
        assert inputs["mask"].dtype == np.bool_
    if case.q_segments is not None:
        assert inputs["q_segment_ids"].shape == (case.batch, case.q_len)
        assert inputs["kv_segment_ids"].shape == (case.batch, case.kv_len)
    assert list(FAMILY.events(case))


def test_strategy_reaches_the_hard_paths():
    seen: collections.Counter = collections.Counter()

    @DRAWS
    @given(case=cases.hstu_cases())
    def collect(case):
        seen.update(FAMILY.events(case))

    collect()
    wanted = {
        "multi-q-block", "multi-kv-block", "kv-compute-split", "bwd-multi-q-block",
        "bwd-multi-kv-block", "bwd-kv-compute-split", "bwd-blocks-differ", "q-len<kv-len",
        "q-len>kv-len",
        "mask:causal", "mask:full", "numpy-mask", "empty-blocks", "partial-blocks", "window",
        "window-0", "window-covers-all", "window-at-block-edge", "segments", "unsorted-segments",
        "length-1-segment", "q-kv-segments-differ", "rows-without-keys", "bfloat16",
        "float32", "sm-scale", "multi-batch", "multi-head",
    }
    assert wanted <= set(seen), f"never reached: {sorted(wanted - set(seen))}"


def test_same_case_same_arrays():
    case = HstuCase(dtype="bfloat16", seed=5, mask="numpy", mask_pattern="random",
                    mask_density=0.5, mask_seed=1, q_segments=((1, 128),),
                    kv_segments=((1, 128),))
    a, b = case.materialize(), case.materialize()
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"q_len": 100}, "q_len must be a multiple of 128"),
        ({"mask": "sliding"}, "mask must be one of"),
        ({"mask": "numpy"}, "mask_pattern must be one of"),
        ({"mask_seed": 3}, "describe numpy masks only"),
        ({"window": -1}, "window must be an int >= 0"),
        ({"q_segments": ((0, 128),)}, "both be given or both be None"),
        ({"q_segments": ((0, 100),), "kv_segments": ((0, 128),)}, "must sum to 128"),
        ({"block_q": 256}, "block_q=256 must be a multiple of 128 dividing 128"),
        ({"block_kv_compute": 64}, "block_kv_compute=64"),
        ({"scale": -1.0}, "scale must be a positive finite float"),
        ({"dtype": "int8"}, "dtype must be one of"),
    ],
)
def test_invalid_case_is_a_clear_error(fields, message):
    with pytest.raises(ValueError, match=message):
        HstuCase(**{"dtype": "float32", "seed": 0, **fields})


@given(st.data())
@settings(max_examples=30, deadline=None, database=None)
def test_runs_cover_the_length(data):
    length = data.draw(st.sampled_from([128, 256, 384]))
    runs = data.draw(cases._runs(length, max_runs=4, max_id=3))
    assert sum(n for _, n in runs) == length and all(n >= 1 for _, n in runs)
