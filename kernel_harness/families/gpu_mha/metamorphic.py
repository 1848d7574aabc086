"""gpu-mha's hooks for the metamorphic properties.

Visibility comes from the case description (causal and the one segment-id array that
serves queries and keys: :meth:`kernel_harness.families.gpu_mha.cases.MhaCase.visible`).
Every query sees at least itself or key 0 (the contract), so no output may be
non-finite and no cotangent needs zeroing. No GQA (one kv head per query head), no
TPU lowering (a Triton kernel) and no sharded runs.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import strategies as st

from kernel_harness.families.gpu_common import TILE_SIZES, is_pow2
from kernel_harness.families.gpu_mha.cases import OVERSIZE_BLOCK, MhaCase
from kernel_harness.ops.attention.vocabulary import roles
from kernel_harness.spec.hooks import Metamorphic, Toggle, toggles

ROLES = roles("bqhd", kv_head="head", segment_ids=("batch", "key"))


def visible(case: MhaCase) -> np.ndarray:
    """``[batch, 1, q_len, kv_len]``: causal and segment ids."""
    return case.visible()[:, None]


def segments(case: MhaCase) -> tuple[np.ndarray, np.ndarray] | None:
    """The one ``[batch, len]`` segment-id array, as the query and the key ids; or None."""
    seg = case.segment_ids()
    return None if seg is None else (seg, seg)


def _blocks(length: int) -> list[int]:
    """Every block the kernel accepts along ``length``, and an oversize one where the length it
    clamps to is itself a valid block (a power of two >= 16: 96 is not)."""
    tiles = [b for b in TILE_SIZES if b <= length and length % b == 0]
    return tiles + ([OVERSIZE_BLOCK] if is_pow2(length) and 16 <= length <= OVERSIZE_BLOCK else [])


def _backward_pairs(case: MhaCase) -> list[tuple[int, int]]:
    """(block_q_dq, block_kv_dkv) giving as many q blocks as kv blocks (the fused backward)."""
    return [(bq, bk) for bq in _blocks(case.q_len) for bk in _blocks(case.kv_len)
            if case.q_len // min(bq, case.q_len) == case.kv_len // min(bk, case.kv_len)]


def block_variants(case: MhaCase) -> st.SearchStrategy[MhaCase]:
    """The same case with the forward and backward blocks redrawn (and launch settings,
    unused in interpret mode)."""

    @st.composite
    def variant(draw: st.DrawFn) -> MhaCase:
        q, kv = _blocks(case.q_len), _blocks(case.kv_len)
        bwd_q, bwd_kv = draw(st.sampled_from(_backward_pairs(case)))
        return dataclasses.replace(
            case, block_q=draw(st.sampled_from(q)), block_k=draw(st.sampled_from(kv)),
            block_q_dkv=draw(st.sampled_from(q)), block_kv_dq=draw(st.sampled_from(kv)),
            block_q_dq=bwd_q, block_kv_dkv=bwd_kv,
            num_warps=draw(st.sampled_from((None, 4, 8))),
            num_stages=draw(st.sampled_from((1, 2, 3))),
        )

    return variant()


def option_toggles(case: MhaCase) -> list[Toggle]:
    """The case without causal, and without its segment ids (both change visibility)."""
    return toggles(case, ("causal", case.causal, {"causal": False}),
                   ("segment ids", case.segment_runs is not None, {"segment_runs": None}))


METAMORPHIC = Metamorphic(
    roles=ROLES,
    visible=visible,
    segments=segments,
    block_variants=block_variants,
    option_toggles=option_toggles,
    logit_input="q",
)
