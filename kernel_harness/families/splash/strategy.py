"""The Hypothesis strategy drawing splash cases (:func:`splash_cases`): heads, lengths,
masks in the mask language, segments, soft cap, sinks (the attention problem's fields, as
splash takes them), then splash's blocks (:func:`splash_blocks`, the block ``Config`` that
block-size invariance draws again) and layouts. Its data draws are the op's."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import assume
from hypothesis import strategies as st

from kernel_harness.core.case import logit_scales_for
from kernel_harness.families.splash.cases import HEAD_DIMS, LANES, LAYOUTS, SEQ_LENS, SplashCase
from kernel_harness.ops.attention.mask_draws import acceptable, chance, key_counts, mask_spec, pick
from kernel_harness.ops.attention.masks import COMPUTABLE_KINDS, LEAF_KINDS, NUMPY_KINDS, parse_mask
from kernel_harness.ops.attention.problem import AttentionProblem
from kernel_harness.ops.attention.segment_draws import aligned_runs, packed_runs
from kernel_harness.ops.attention.strategy import Config, calibrated, check_without


def _divisors(n: int, cap: int | None = None) -> tuple[int, ...]:
    return tuple(b for b in range(LANES, (cap or n) + 1, LANES) if n % b == 0)


def _maybe(draw: st.DrawFn, setting: bool | None, p: float) -> bool:
    return chance(draw, p) if setting is None else setting


def _blocks(draw: st.DrawFn, length: int, p_large: float = 0.4) -> int:
    """A block size dividing ``length``: 128 (the most blocks) unless, with probability
    ``p_large``, a larger divisor."""
    divisors = _divisors(length)
    if len(divisors) == 1 or not chance(draw, p_large):
        return divisors[0]
    return draw(st.sampled_from(divisors[1:]))


def _kv_blocks(draw: st.DrawFn, length: int, p_split: float) -> tuple[int, int]:
    """A kv block and its compute block. With probability about ``p_split`` (and always
    when shrunk) a block of several 128-wide compute blocks, the in-kernel sub-block
    loop; otherwise 128 (the most kv blocks)."""
    # Prefer (shrink to) a block that still leaves several kv blocks: 256 of 512.
    larger = sorted(_divisors(length)[1:], key=lambda b: (length // b < 2, b))
    if not larger or chance(draw, 1 - p_split):
        return LANES, LANES
    block = draw(st.sampled_from(larger))
    return block, draw(st.sampled_from(_divisors(block)[:-1]))


def splash_blocks(*, fused_only: bool = False) -> Config:
    """Splash's block ``Config``: the forward's and the dkv kernel's blocks (128, the most
    blocks, unless a larger divisor; a kv block of several compute blocks about 7 times in
    10, 19 in 20 under one in-kernel computed mask, where sub-block offsets matter), the
    fused backward or the split one with its dq blocks (``fused_only``: the fused one
    always, for an implementation without the split one)."""
    @st.composite
    def blocks(draw: st.DrawFn, problem: AttentionProblem) -> dict[str, Any]:
        masks = problem.head_masks()
        in_kernel = len(set(masks)) == 1 and parse_mask(masks[0]).kind in COMPUTABLE_KINDS
        p_split = 0.95 if in_kernel else 0.7
        q_len, kv_len = problem.q_len, problem.kv_len
        block_q, (block_kv, block_kv_compute) = (
            _blocks(draw, q_len), _kv_blocks(draw, kv_len, p_split))
        block_q_dkv, (block_kv_dkv, block_kv_dkv_compute) = (
            _blocks(draw, q_len), _kv_blocks(draw, kv_len, p_split))
        fused = fused_only or draw(st.booleans())
        return dict(block_q=block_q, block_kv=block_kv, block_kv_compute=block_kv_compute,
                    block_q_dkv=block_q_dkv, block_kv_dkv=block_kv_dkv,
                    block_kv_dkv_compute=block_kv_dkv_compute, fused_bwd=fused,
                    block_q_dq=None if fused else _blocks(draw, q_len),
                    block_kv_dq=None if fused else _blocks(draw, kv_len))

    return blocks


@st.composite
def splash_cases(
    draw: st.DrawFn,
    *,
    dtypes: tuple[str, ...] = SplashCase.FEATURES.dtypes,
    seq_lens: tuple[int, ...] = SEQ_LENS,
    heads: str | None = None,
    mask_kinds: tuple[str, ...] = LEAF_KINDS,
    per_head_masks: bool | None = None,
    segments: bool | None = None,
    soft_cap: bool | None = None,
    sinks: bool | None = None,
    max_batch: int = 2,
    max_empty_row_fraction: float = 0.25,
    without: frozenset[str] = frozenset(),
) -> SplashCase:
    """Draws a :class:`SplashCase` reaching the kernel's hard paths.

    Keyword options pin a feature (True/False) or leave it drawn (None);
    ``heads`` is one of ``mha``, ``gqa``, ``mqa`` or None; ``mask_kinds`` limits
    the leaf kinds. Rows that see no key occur only with sinks (at most
    ``max_empty_row_fraction`` of them). Shrinks towards one float32 MHA head,
    512x512, ``causal(offset=0)``, no segments/cap/sinks, 128 query blocks, 256 kv
    blocks of 128 compute blocks, the split backward and head-dim-minor layouts.
    ``without`` names optional features (``Family.optional``) never drawn (an unknown
    name is an error).
    """
    check_without(SplashCase, without)
    segments = False if "segments" in without else segments
    soft_cap = False if "soft-cap" in without else soft_cap
    sinks = False if "sinks" in without else sinks
    per_head_masks = False if "per-head-masks" in without else per_head_masks
    heads = "mha" if "gqa" in without else heads
    dropped = {"local-window": {"local"}, "chunked-causal": {"chunked"},
               "numpy-mask": set(NUMPY_KINDS)}
    for name, kinds in dropped.items():
        if name in without:
            mask_kinds = tuple(k for k in mask_kinds if k not in kinds)
    computable_only = "numpy-mask" in without
    dtype = draw(st.sampled_from(dtypes))
    kind = heads or pick(draw, (("mha", 26), ("gqa", 40), ("mqa", 34)))
    if kind == "mha":
        hq = hkv = draw(st.sampled_from([1, 2, 3]))
    elif kind == "gqa":
        hq, hkv = draw(st.sampled_from([(4, 2), (6, 3), (6, 2)]))
    elif kind == "mqa":
        hq, hkv = draw(st.sampled_from([2, 1, 4])), 1
    else:
        raise ValueError(f"heads must be mha, gqa, mqa or None, got {heads!r}")
    # Longest first: 512 holds several kv blocks of several compute blocks each.
    longer = sorted((n for n in seq_lens if n > LANES), reverse=True) or list(seq_lens)
    q_len = draw(st.sampled_from(seq_lens) if chance(draw, 0.2) else st.sampled_from(longer))
    differ = "q-len-ne-kv-len" not in without and chance(draw, 0.5)
    kv_len = draw(st.sampled_from(seq_lens)) if differ else q_len
    head_dim = 64 if chance(draw, 0.2) else 128
    other_v = "head-dim-v" not in without and chance(draw, 0.2)
    head_dim_v = draw(st.sampled_from(HEAD_DIMS)) if other_v else head_dim
    has_sinks = _maybe(draw, sinks, 0.45)
    cap = draw(st.sampled_from([2.5, 1.0, 10.0, 0.5])) if _maybe(draw, soft_cap, 0.45) else None

    seg_options: list[Any] = [(None, None)]
    if _maybe(draw, segments, 0.6):
        q_segs = packed_runs(draw, q_len, None)
        seg_options = [(q_segs, aligned_runs(draw, q_segs, kv_len))]
        if chance(draw, 0.4):  # kv ids drawn on their own: true cross-segment attention
            kv_segs = packed_runs(draw, kv_len, sorted({i for i, _ in q_segs}))
            seg_options.insert(0, (q_segs, kv_segs))

    def draw_masks() -> tuple[str, ...]:
        n = hq if hq > 1 and _maybe(draw, per_head_masks, 0.15) else 1
        return tuple(mask_spec(draw, mask_kinds, q_len, kv_len, not has_sinks,
                                computable_only) for _ in range(n))

    def ok(masks: tuple[str, ...], segs: Any) -> bool:
        counts = key_counts(masks, q_len, kv_len, *segs)
        return acceptable(counts, has_sinks, max_empty_row_fraction)

    # A few tries at a mask under which every row sees keys; then simpler segments;
    # then the full mask (aligned segments always leave every row a key under it).
    tries = [(segs, draw_masks) for segs in seg_options for _ in range(3)]
    tries.append((seg_options[-1], lambda: ("full",)))
    for segs, make in tries:
        masks = make()
        if ok(masks, segs):
            break
    assume(ok(masks, segs))
    q_segs, kv_segs = segs

    batch = draw(st.integers(1, max_batch))
    problem = AttentionProblem(
        dtype=dtype, seed=0, batch=batch, q_heads=hq, kv_heads=hkv, q_len=q_len,
        kv_len=kv_len, head_dim=head_dim, masks=masks)
    blocks = draw(splash_blocks(fused_only="split-bwd" in without)(problem))
    layouts = [LAYOUTS[1] if "layouts" not in without and chance(draw, 0.25) else LAYOUTS[0]
               for _ in range(3)]
    case = SplashCase(
        dtype=dtype, seed=draw(st.integers(0, 2**31 - 1)), batch=batch,
        q_heads=hq, kv_heads=hkv, mqa=kind == "mqa",
        q_len=q_len, kv_len=kv_len, head_dim=head_dim,
        head_dim_v=head_dim_v if head_dim_v != head_dim else None, masks=masks,
        q_segments=None if q_segs is None else (q_segs,) * batch,
        kv_segments=None if kv_segs is None else (kv_segs,) * batch,
        soft_cap=cap, sinks=has_sinks, **blocks,
        q_layout=layouts[0], k_layout=layouts[1], v_layout=layouts[2])
    return dataclasses.replace(case, logit_scale=draw(st.sampled_from(
        logit_scales_for(dtype, calibrated=calibrated(case)))))
