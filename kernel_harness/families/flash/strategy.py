"""The Hypothesis strategies drawing flash cases: segment layouts, block pairs and
:func:`flash_cases`."""

from __future__ import annotations

import math

from hypothesis import assume
from hypothesis import strategies as st

from kernel_harness.core.case import logit_scales_for
from kernel_harness.families.flash.cases import KV_TILE, Q_TILE, FlashCase
from kernel_harness.ops.attention.segments import Runs, segment_ids

#: The dtypes whose outputs the family judges by the calibrated bound (family.py builds
#: its tolerance table from this): they draw large logits too (``logit_scales_for``).
CALIBRATED_DTYPES: frozenset[str] = frozenset({"bfloat16"})


def _cuts(draw: st.DrawFn, length: int, max_segments: int) -> list[int]:
    """Run boundaries ``[0, ..., length]``, sometimes with a length-1 run."""
    cuts = set(draw(st.lists(st.integers(1, length - 1), max_size=max_segments - 1)))
    if cuts and draw(st.booleans()):
        c = draw(st.sampled_from(sorted(cuts)))
        if c + 1 < length:
            cuts.add(c + 1)  # a length-1 segment
    return [0, *sorted(cuts), length]


@st.composite
def segment_runs(draw: st.DrawFn, length: int, *, max_segments: int = 5,
                 max_id: int = 3) -> Runs:
    """A segment layout of ``length`` positions: up to ``max_segments`` runs with ids in
    ``[0, max_id]`` in any order (repeats allowed), sometimes a length-1 run. Shrinks
    towards one segment with id 0."""
    bounds = _cuts(draw, length, max_segments)
    ids = draw(st.lists(st.integers(0, max_id), min_size=len(bounds) - 1,
                        max_size=len(bounds) - 1))
    return tuple((i, hi - lo) for i, lo, hi in zip(ids, bounds, bounds[1:], strict=False))


@st.composite
def matched_runs(draw: st.DrawFn, length: int, kv_runs: Runs, *, causal: bool,
                 max_segments: int = 5, max_id: int = 3) -> Runs:
    """A q layout for kv layout ``kv_runs``: each q run takes an id that its first row can
    see (under ``causal``, one of the kv ids at positions <= that row), except about one
    run in eight after the first, whose id is drawn from ``[0, max_id + 1]`` and may see no
    key at all. The first run always sees a key: a layout in which no row does leaves
    nothing inside the contract to compare. Shrinks towards one run with the first
    visible id."""
    kv_ids = segment_ids(kv_runs)
    bounds = _cuts(draw, length, max_segments)
    runs = []
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        seen = kv_ids[: lo + 1] if causal else kv_ids
        if weighted(draw, ((True, 7), (False, 1))) or lo == 0:
            i = draw(st.sampled_from(sorted({int(x) for x in seen})))
        else:
            i = draw(st.integers(0, max_id + 1))
        runs.append((i, hi - lo))
    return tuple(runs)


def weighted(draw: st.DrawFn, choices: tuple[tuple[object, int], ...]) -> object:
    """One of ``choices`` (``(value, weight)`` pairs) with probability ~ weight; shrinks
    towards the first value."""
    x = draw(st.integers(0, sum(w for _, w in choices) - 1))
    for value, w in choices:
        if x < w:
            return value
        x -= w
    raise AssertionError("unreachable")


def _mostly(p_true_in_4: int = 3) -> st.SearchStrategy[bool]:
    """True with probability ``p/4``; shrinks towards False."""
    return st.integers(0, 3).map(lambda x: x >= 4 - p_true_in_4)


def blocks_of(length: int, unit: int, max_blocks: int, largest: int) -> list[int]:
    """Multiples of ``unit`` dividing ``length`` into at most ``max_blocks`` blocks,
    largest first."""
    return [
        b for b in range(min(length, largest), 0, -unit)
        if b % unit == 0 and length % b == 0 and length // b <= max_blocks
    ]


@st.composite
def block_pair(draw: st.DrawFn, length: int, *, unit: int, max_blocks: int,
               largest: int = 512, p_grid: int = 5, p_sub: int = 7) -> tuple[int, int]:
    """``(major, minor)`` blocks for an axis of ``length``: a grid of major blocks with
    probability ~``p_grid``/10 and sub-tiles (at most ``max_blocks`` minor blocks per
    major block) with ~``p_sub``/10, where the length allows. Shrinks towards one block
    of the whole axis."""
    majors = blocks_of(length, unit, max_blocks, largest)
    grid = len(majors) > 1 and weighted(draw, ((False, 10 - p_grid), (True, p_grid)))
    major = draw(st.sampled_from(majors[1:])) if grid else majors[0]
    minors = [b for b in blocks_of(major, unit, max_blocks, major) if b < major]
    sub = minors and weighted(draw, ((False, 10 - p_sub), (True, p_sub)))
    return major, (draw(st.sampled_from(minors)) if sub else major)


#: Features an implementation may declare it lacks (``--without``), and what the strategy
#: then stops drawing.
OPTIONAL = {
    "causal": "causal always False",
    "segments": "no segment ids",
    "bias": "no additive ab (bias)",
    "q-len-ne-kv-len": "q_len == kv_len",
}


@st.composite
def flash_cases(
    draw: st.DrawFn,
    *,
    dtypes: tuple[str, ...] = ("float32", "bfloat16"),
    max_batch_heads: int = 4,
    kv_lens: tuple[tuple[int, int], ...] = ((256, 3), (512, 4), (384, 2), (128, 1)),
    q_lens: tuple[int, ...] = (64, 128, 192, 256, 384, 512),
    head_dims: tuple[int, ...] = (64, 128, 32),
    max_blocks: int = 4,
    without: frozenset[str] = frozenset(),
) -> FlashCase:
    """Draws a :class:`FlashCase`.

    Features are on most of the time (causal and sm_scale != 1 four times in five, bias
    and segments three in four), so one example exercises several at once; the choices
    that pick kernel paths are drawn first, where Hypothesis varies them most. Block sizes
    are drawn independently for the forward, dkv and dq kernels, each axis tiled as one
    block, a grid of blocks, sub-tiles or both (at most ``max_blocks`` blocks per axis, to
    bound interpret time); the forward takes its single-tile path (block_k == kv_len) about
    a third of the time; the forward block_q sometimes does not divide q_len and block_b
    sometimes does not divide batch. ``kv_lens`` are ``(length, weight)`` pairs. Shrinks
    towards float32, batch 1, one head, q_len = kv_len = 256, no features, one block per
    axis. ``without`` names :data:`OPTIONAL` features never drawn (the draws are the
    same when it is empty; an unknown name is an error).
    """
    unknown = set(without) - set(OPTIONAL)
    if unknown:
        raise ValueError(f"flash: unknown optional features {sorted(unknown)}; known: "
                         f"{sorted(OPTIONAL)}")
    # The choices that pick kernel paths come first: Hypothesis varies early choices most.
    single_tile = weighted(draw, ((False, 2), (True, 1)))  # forward block_k == kv_len
    causal = weighted(draw, ((False, 1), (True, 4))) and "causal" not in without
    segmented = draw(_mostly()) and "segments" not in without
    bias = draw(_mostly()) and "bias" not in without
    batch = weighted(draw, ((1, 2), (2, 3), (3, 5)))
    heads = draw(st.integers(1, max(1, min(2, max_batch_heads // batch))))
    # block_b: one, all of the batch, or (batch 3) 2, which leaves a partial last block.
    block_b = weighted(draw, ((1, 2), (batch, 4), (max(1, batch - 1), 4)))
    dtype = draw(st.sampled_from(dtypes))
    kv_len = weighted(draw, kv_lens if single_tile else tuple(
        (n, w) for n, w in kv_lens if n > KV_TILE))
    relation = weighted(draw, (("same", 3), ("shorter", 2), ("longer", 2)))
    others = [n for n in q_lens if (n < kv_len if relation == "shorter" else n > kv_len)]
    differ = relation != "same" and others and "q-len-ne-kv-len" not in without
    q_len = draw(st.sampled_from(others)) if differ else kv_len
    head_dim = draw(st.sampled_from(head_dims))
    inv_sqrt_d = 1.0 / math.sqrt(head_dim)
    # sm_scale == 1.0 skips the kernel's scaling code, so it is drawn a fifth of the time.
    sm_scale = weighted(draw, ((inv_sqrt_d, 2), (0.5 * inv_sqrt_d, 2), (1.0, 1)))
    q_segments = kv_segments = None
    if segmented:
        kv_segments = tuple(draw(segment_runs(kv_len)) for _ in range(batch))
        if q_len == kv_len and draw(st.booleans()) is False:
            q_segments = kv_segments  # packed self-attention: same layout
        else:
            q_segments = tuple(
                draw(matched_runs(q_len, row, causal=causal)) for row in kv_segments
            )

    blocks: dict[str, int] = {"block_b": block_b}
    if single_tile or kv_len == KV_TILE:
        blocks["block_k_major"] = blocks["block_k"] = kv_len
    else:
        major, minor = draw(block_pair(kv_len, unit=KV_TILE, max_blocks=max_blocks))
        if minor == kv_len:  # not single-tile after all: force sub-tiles
            minor = draw(st.sampled_from(blocks_of(kv_len, KV_TILE, max_blocks, kv_len)[1:]))
        blocks["block_k_major"], blocks["block_k"] = major, minor
    q_blocks = blocks_of(q_len, Q_TILE, max_blocks, 256)
    ragged = [b for b in range(Q_TILE, min(q_len, 256), Q_TILE)
              if q_len % b and -(-q_len // b) <= max_blocks]
    if ragged and weighted(draw, ((False, 5), (True, 2))):
        blocks["block_q"] = draw(st.sampled_from(ragged))  # last forward q block partial
    else:
        blocks["block_q"] = draw(st.sampled_from(q_blocks))
    blocks["block_q_major_dkv"], blocks["block_q_dkv"] = draw(
        block_pair(q_len, unit=Q_TILE, max_blocks=max_blocks, largest=256))
    blocks["block_k_major_dkv"], blocks["block_k_dkv"] = draw(
        block_pair(kv_len, unit=KV_TILE, max_blocks=max_blocks))
    blocks["block_k_major_dq"], blocks["block_k_dq"] = draw(
        block_pair(kv_len, unit=KV_TILE, max_blocks=max_blocks))
    blocks["block_q_dq"] = draw(st.sampled_from(q_blocks))
    case = FlashCase(
        dtype=dtype, seed=draw(st.integers(0, 2**31 - 1)), batch=batch, q_heads=heads,
        q_len=q_len, kv_len=kv_len, head_dim=head_dim, causal=causal, sm_scale=sm_scale,
        bias=bias, q_segments=q_segments, kv_segments=kv_segments, **blocks,
        logit_scale=draw(st.sampled_from(
            logit_scales_for(dtype, calibrated=dtype in CALIBRATED_DTYPES))),
    )
    # A row that sees one key has exactly zero dq and dab; when nearly all rows are like
    # that, the rounding noise of those rows dominates the (tiny) scale of dq and no
    # relative error can judge it. Rare with matched layouts.
    seen = case.visible().sum(axis=-1)
    assume(4 * int((seen >= 2).sum()) >= int((seen >= 1).sum()))
    # With a bias, a partial last q block makes the kernel read a bias block past the end of
    # ab; TPU interpret mode rejects that read (IndexError, out-of-bounds block) where a TPU
    # pads it. Not drawn; written in the contract.
    q_blocks = (case.block_q, case.block_q_major_dkv, case.block_q_dkv, case.block_q_dq)
    assume(not (case.bias and any(case.q_len % b for b in q_blocks)))
    return case


def flash_seed_cases(without: frozenset[str] = frozenset()) -> tuple[FlashCase, ...]:
    """The case every flash matches-reference run tries first: the tiled forward (kv grid
    and sub-tiles) with batch 3 in blocks of 2, so the last batch block is partial, and
    causal, bias and segments (one row with length-1 segments and ids out of order) on
    unless ``without`` names them. A 30-example derandomized run can miss the partial
    batch block altogether; this case cannot."""
    runs = (((2, 100), (0, 1), (1, 300), (2, 111)), ((0, 512),), ((3, 7), (1, 505)))
    segmented = "segments" not in without
    return (FlashCase(
        dtype="float32", seed=11, batch=3, q_heads=1, q_len=512, kv_len=512, head_dim=64,
        causal="causal" not in without, sm_scale=0.0625, bias="bias" not in without,
        q_segments=runs if segmented else None, kv_segments=runs if segmented else None,
        block_b=2, block_q=128, block_k_major=256, block_k=128,
        block_q_major_dkv=256, block_k_major_dkv=256, block_k_dkv=128, block_q_dkv=128,
        block_k_major_dq=256, block_k_dq=128, block_q_dq=128,
    ),)
