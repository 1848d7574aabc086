"""The attention op's metamorphic builders shared by every attention family."""

import dataclasses

import numpy as np

from kernel_harness.ops.attention.metamorphic import as_mha_hook, shard_case


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
