"""Flash's hooks for the metamorphic properties and TPU lowering.

Visibility comes from the case description (``FlashCase.visible``). No sharded
runs: flash has no ``interpret`` argument, so on CPU it runs only in TPU
interpret mode, whose cross-device barriers deadlock under a CPU ``shard_map``
(seen with jax 0.10.2); ``local_case`` below is kept for a TPU run.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import strategies as st

from kernel_harness.families.flash import kernel as _kernel
from kernel_harness.families.flash.cases import KV_TILE, Q_TILE, FlashCase
from kernel_harness.families.flash.strategy import block_pair, blocks_of
from kernel_harness.ops.attention.metamorphic import shard_case, zero_cotangent
from kernel_harness.ops.attention.vocabulary import roles
from kernel_harness.spec.hooks import Metamorphic, Toggle, toggles

ROLES = roles("bhqd", kv_head="head", ab=("batch", "head", "query", "key"),
              segment_ids_q=("batch", "query"), segment_ids_kv=("batch", "key"))


def visible(case: FlashCase) -> np.ndarray:
    """``[batch, 1, q_len, kv_len]``: causal and segment ids."""
    return case.visible()[:, None]


def segments(case: FlashCase) -> tuple[np.ndarray, np.ndarray] | None:
    """``[batch, q_len]`` / ``[batch, kv_len]`` segment ids, or None."""
    return case.segment_arrays()


def block_variants(case: FlashCase) -> st.SearchStrategy[FlashCase]:
    """The same case with the forward and both backward kernels' blocks redrawn."""

    @st.composite
    def variant(draw: st.DrawFn) -> FlashCase:
        q_blocks = blocks_of(case.q_len, Q_TILE, 4, 256)
        kv_pair = block_pair(case.kv_len, unit=KV_TILE, max_blocks=4)
        q_pair = block_pair(case.q_len, unit=Q_TILE, max_blocks=4, largest=256)
        k_major, k = draw(kv_pair)
        q_major_dkv, q_dkv = draw(q_pair)
        k_major_dkv, k_dkv = draw(kv_pair)
        k_major_dq, k_dq = draw(kv_pair)
        return dataclasses.replace(
            case, block_q=draw(st.sampled_from(q_blocks)), block_k_major=k_major, block_k=k,
            block_q_major_dkv=q_major_dkv, block_q_dkv=q_dkv, block_k_major_dkv=k_major_dkv,
            block_k_dkv=k_dkv, block_k_major_dq=k_major_dq, block_k_dq=k_dq,
            block_q_dq=draw(st.sampled_from(q_blocks)),
        )

    return variant()


def option_toggles(case: FlashCase) -> list[Toggle]:
    """The case without causal, without segment ids, without its bias."""
    return toggles(
        case, ("causal", case.causal, {"causal": False}),
        ("segment ids", case.q_segments is not None, {"q_segments": None, "kv_segments": None}),
        ("bias", case.bias, {"bias": False}, "values"))


def constrain(case: FlashCase, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The contract's zero cotangent on rows that see no key."""
    return zero_cotangent(inputs, case.rows_without_keys()[:, None, :, None])


def may_be_nonfinite(case: FlashCase) -> dict[str, np.ndarray]:
    """out of rows that see no key is outside the contract."""
    return {"out": case.rows_without_keys()[:, None, :, None]}


def local_case(case: FlashCase, mesh: dict[str, int]) -> FlashCase | None:
    """One shard's case (:func:`shard_case`; the segment layouts of the first rows stand in
    for the shard's), its batch block no larger than its batch."""
    shard = shard_case(case, mesh, per_row=("q_segments", "kv_segments"))
    return shard and dataclasses.replace(shard, block_b=min(case.block_b, shard.batch))


METAMORPHIC = Metamorphic(
    roles=ROLES,
    visible=visible,
    segments=segments,
    block_variants=block_variants,
    option_toggles=option_toggles,
    may_be_nonfinite=may_be_nonfinite,
    constrain=constrain,
    traceable=_kernel.traceable,
)
