"""The attention op's metamorphic builders shared by every attention family."""

import dataclasses

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_harness.ops.attention.metamorphic import (
    as_mha_hook,
    inside,
    lane_block_variants,
    shard_case,
)


@dataclasses.dataclass(frozen=True)
class Gqa:
    batch: int
    q_heads: int
    kv_heads: int
    lengths: tuple[int, ...] | None = None


@dataclasses.dataclass(frozen=True)
class HeadsOnly:
    batch: int
    q_heads: int


def test_shard_case_divides_batch_and_heads_and_keeps_the_first_rows():
    case = Gqa(batch=4, q_heads=8, kv_heads=2, lengths=(5, 6, 7, 8))
    assert shard_case(case, {"batch": 2, "head": 2}, per_row=("lengths",)) == Gqa(
        batch=2, q_heads=4, kv_heads=1, lengths=(5, 6))
    assert shard_case(Gqa(batch=2, q_heads=4, kv_heads=1), {"head": 2}) is None  # kv heads
    assert shard_case(case, {"batch": 3}) is None
    assert shard_case(HeadsOnly(batch=2, q_heads=6), {"head": 3}) == HeadsOnly(2, 2)
    assert shard_case(Gqa(batch=2, q_heads=2, kv_heads=2), {}, per_row=("lengths",)) == Gqa(
        batch=2, q_heads=2, kv_heads=2)


def test_as_mha_repeats_each_kv_head_for_its_query_heads():
    hook = as_mha_hook(layout="bhqd")
    k = np.arange(2 * 2 * 3 * 1, dtype=np.float32).reshape(2, 2, 3, 1)
    case, out = hook(Gqa(batch=2, q_heads=4, kv_heads=2), {"k": k, "v": k + 1, "q": k})
    assert case == Gqa(batch=2, q_heads=4, kv_heads=4)
    np.testing.assert_array_equal(out["k"][:, 1], k[:, 0])
    np.testing.assert_array_equal(out["k"][:, 2], k[:, 1])
    assert out["q"] is k
    assert hook(Gqa(batch=1, q_heads=2, kv_heads=2), {"k": k}) is None


@dataclasses.dataclass(frozen=True)
class Blocks:
    q_len: int = 256
    kv_len: int = 384
    block_q: int = 128
    block_kv: int = 128
    block_kv_compute: int = 128
    block_q_dkv: int = 128
    block_kv_dkv: int = 128
    block_kv_dkv_compute: int = 128
    block_q_dq: int | None = None
    block_kv_dq: int | None = None
    fused_bwd: bool = True


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_lane_block_variants_draw_lane_multiple_divisors(data):
    case = Blocks()
    v = data.draw(lane_block_variants(case, 128))
    for length, block in ((256, v.block_q), (384, v.block_kv), (256, v.block_q_dkv),
                          (384, v.block_kv_dkv), (v.block_kv, v.block_kv_compute),
                          (v.block_kv_dkv, v.block_kv_dkv_compute)):
        assert block % 128 == 0 and length % block == 0
    # no dq kernel: those fields untouched
    assert (v.block_q_dq, v.block_kv_dq, v.fused_bwd) == (None, None, True)


def test_inside_is_the_complement_of_outside():
    valid = inside(lambda case: {"out": np.array([True, False])} if case else {})
    np.testing.assert_array_equal(valid(1)["out"], [False, True])
    assert valid(0) == {}
