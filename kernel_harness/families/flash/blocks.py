"""Flash's own configuration: its eleven block sizes, their checks, drawn once by
:func:`blocks` (the case strategy's and block-size invariance's), and their labels.

Block sizes are drawn independently for the forward, dkv and dq kernels, each axis tiled
as one block, a grid of blocks, sub-tiles or both (at most :data:`MAX_BLOCKS` blocks per
axis, to bound interpret time); the forward takes its single-tile path (block_k ==
kv_len) about a third of the time; the forward block_q sometimes does not divide q_len
(never with a bias: see the contract) and block_b sometimes does not divide batch.
Shrinks towards one block per axis.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from kernel_harness.ops.attention.mask_draws import weighted
from kernel_harness.ops.attention.problem import AttentionProblem

#: Every kv-axis block of the kernel must be a multiple of this (its softmax lane width).
KV_TILE = 128
#: q-axis blocks are drawn from multiples of this (safe sublane tiling for f32 and bf16).
Q_TILE = 32

FWD_BLOCKS = ("block_b", "block_q", "block_k_major", "block_k")
BWD_BLOCKS = (
    "block_q_major_dkv", "block_k_major_dkv", "block_k_dkv", "block_q_dkv",
    "block_k_major_dq", "block_k_dq", "block_q_dq",
)
#: The ``BlockSizes`` fields, forward then backward.
BLOCKS = FWD_BLOCKS + BWD_BLOCKS
#: At most this many blocks per axis are drawn (bounds interpret time).
MAX_BLOCKS = 4


def _divides(name: str, block: int, dim_name: str, dim: int) -> None:
    if block < 1 or dim % block:
        raise ValueError(f"{name}={block} must be positive and divide {dim_name}={dim}")


def check_blocks(case: Any) -> None:
    """Raises, naming the field, unless the case's blocks tile it as the kernel needs."""
    if not 1 <= case.block_b <= case.batch:
        raise ValueError(f"block_b={case.block_b} must be in [1, batch={case.batch}]")
    if not 1 <= case.block_q <= case.q_len:  # the forward q block need not divide
        raise ValueError(f"block_q={case.block_q} must be in [1, q_len={case.q_len}]")
    for q_block in ("block_q_major_dkv", "block_q_dq"):
        _divides(q_block, getattr(case, q_block), "q_len", case.q_len)
    _divides("block_q_dkv", case.block_q_dkv, "block_q_major_dkv", case.block_q_major_dkv)
    for major, minor in (("block_k_major", "block_k"), ("block_k_major_dkv", "block_k_dkv"),
                         ("block_k_major_dq", "block_k_dq")):
        _divides(major, getattr(case, major), "kv_len", case.kv_len)
        _divides(minor, getattr(case, minor), major, getattr(case, major))
        if getattr(case, minor) % KV_TILE:
            raise ValueError(f"{minor}={getattr(case, minor)} must be a multiple of {KV_TILE}")


def blocks_of(length: int, unit: int, max_blocks: int, largest: int) -> list[int]:
    """Multiples of ``unit`` dividing ``length`` into at most ``max_blocks`` blocks,
    largest first."""
    return [b for b in range(min(length, largest), 0, -unit)
            if b % unit == 0 and length % b == 0 and length // b <= max_blocks]


@st.composite
def block_pair(draw: st.DrawFn, length: int, *, unit: int, largest: int = 512,
               p_grid: int = 5, p_sub: int = 7) -> tuple[int, int]:
    """``(major, minor)`` blocks for an axis of ``length``: a grid of major blocks with
    probability ~``p_grid``/10 and sub-tiles with ~``p_sub``/10, where the length allows.
    Shrinks towards one block of the whole axis."""
    majors = blocks_of(length, unit, MAX_BLOCKS, largest)
    grid = len(majors) > 1 and weighted(draw, ((False, 10 - p_grid), (True, p_grid)))
    major = draw(st.sampled_from(majors[1:])) if grid else majors[0]
    minors = [b for b in blocks_of(major, unit, MAX_BLOCKS, major) if b < major]
    sub = minors and weighted(draw, ((False, 10 - p_sub), (True, p_sub)))
    return major, (draw(st.sampled_from(minors)) if sub else major)


@st.composite
def _blocks(draw: st.DrawFn, problem: AttentionProblem) -> dict[str, int]:
    q_len, kv_len, batch = problem.q_len, problem.kv_len, problem.batch
    single_tile = weighted(draw, ((False, 2), (True, 1))) or kv_len == KV_TILE
    # block_b: one, all of the batch, or (batch 3) 2, which leaves a partial last block.
    out = {"block_b": weighted(draw, ((1, 2), (batch, 4), (max(1, batch - 1), 4)))}
    if single_tile:
        out["block_k_major"] = out["block_k"] = kv_len
    else:
        major, minor = draw(block_pair(kv_len, unit=KV_TILE))
        if minor == kv_len:  # not single-tile after all: sub-tiles
            minor = draw(st.sampled_from(blocks_of(kv_len, KV_TILE, MAX_BLOCKS, kv_len)[1:]))
        out["block_k_major"], out["block_k"] = major, minor
    q_blocks = blocks_of(q_len, Q_TILE, MAX_BLOCKS, 256)
    # With a bias, a ragged q block makes the kernel read past the end of ab (contract).
    ragged = [] if problem.bias else [b for b in range(Q_TILE, min(q_len, 256), Q_TILE)
                                      if q_len % b and -(-q_len // b) <= MAX_BLOCKS]
    if ragged and weighted(draw, ((False, 5), (True, 2))):
        out["block_q"] = draw(st.sampled_from(ragged))  # last forward q block partial
    else:
        out["block_q"] = draw(st.sampled_from(q_blocks))
    out["block_q_major_dkv"], out["block_q_dkv"] = draw(
        block_pair(q_len, unit=Q_TILE, largest=256))
    out["block_k_major_dkv"], out["block_k_dkv"] = draw(block_pair(kv_len, unit=KV_TILE))
    out["block_k_major_dq"], out["block_k_dq"] = draw(block_pair(kv_len, unit=KV_TILE))
    out["block_q_dq"] = draw(st.sampled_from(q_blocks))
    return out


def blocks(problem: AttentionProblem) -> st.SearchStrategy[dict[str, Any]]:
    """The eleven block sizes of a flash call on ``problem`` (a ``Config`` strategy)."""
    return _blocks(problem)


def block_events(case: Any) -> list[str]:
    """The kernel paths the case's blocks reach, and its unmasked and multi-row grids."""
    ev = [] if case.is_causal else ["non-causal"]
    if case.block_k == case.kv_len:
        ev.append("fwd-single-tile")
    else:
        if case.block_k_major < case.kv_len:
            ev.append("fwd-multi-kv-block")
        if case.block_k < case.block_k_major:
            ev.append("fwd-kv-subtiles")
    if case.q_len > case.block_q:
        ev.append("multi-q-block")
    if case.q_len % case.block_q:
        ev.append("ragged-q-block")
    for on, label in ((case.batch > 1, "batch>1"), (case.q_heads > 1, "heads>1"),
                      (case.block_b > 1, "block_b>1"), (case.block_b < case.batch,
                                                        "block_b<batch"),
                      (bool(case.batch % case.block_b), "partial-batch-block")):
        if on:
            ev.append(label)
    if case.block_q_dkv < case.block_q_major_dkv or case.block_k_dkv < case.block_k_major_dkv:
        ev.append("dkv-subtiles")
    if case.block_k_dq < case.block_k_major_dq:
        ev.append("dq-subtiles")
    if case.kv_len // case.block_k_major_dkv > 1 and case.q_len // case.block_q_major_dkv > 1:
        ev.append("dkv-multi-block")
    if case.kv_len // case.block_k_major_dq > 1 and case.q_len // case.block_q_dq > 1:
        ev.append("dq-multi-block")
    return ev
