"""Cases of the TPU flash attention family and the Hypothesis strategy drawing them.

A :class:`FlashCase` is a readable description: shapes, ``causal``, ``sm_scale``,
whether an attention bias is present, the segment layout as ``(id, length)`` runs
per batch row, and all eleven block sizes. Arrays come from :meth:`materialize`.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from kernel_harness.case import Case, cast, standard_normal

#: Every kv-axis block of the kernel must be a multiple of this (its softmax lane width).
KV_TILE = 128
#: q-axis blocks are drawn from multiples of this (safe sublane tiling for f32 and bf16).
Q_TILE = 32

Runs = tuple[tuple[int, int], ...]
"""A segment layout of one sequence: ``(segment id, length)`` runs in order."""

FWD_BLOCKS = ("block_b", "block_q", "block_k_major", "block_k")
BWD_BLOCKS = (
    "block_q_major_dkv", "block_k_major_dkv", "block_k_dkv", "block_q_dkv",
    "block_k_major_dq", "block_k_dq", "block_q_dq",
)


def expand_runs(runs: Runs) -> np.ndarray:
    """The int32 id per position of one layout, e.g. ``((2, 2), (0, 1))`` -> ``[2, 2, 0]``."""
    return np.concatenate([np.full(n, i, np.int32) for i, n in runs])


def _check_layout(name: str, layout: tuple[Runs, ...], batch: int, length: int) -> None:
    if len(layout) != batch:
        raise ValueError(f"{name}: {len(layout)} rows of runs for batch={batch}")
    for row in layout:
        if any(n < 1 for _, n in row) or sum(n for _, n in row) != length:
            raise ValueError(f"{name}: runs {row} must have positive lengths summing to {length}")


def _divides(name: str, block: int, dim_name: str, dim: int) -> None:
    if block < 1 or dim % block:
        raise ValueError(f"{name}={block} must be positive and divide {dim_name}={dim}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class FlashCase(Case):
    """One call of ``flash_attention`` and its vjp.

    Attributes:
      batch, heads, q_len, kv_len, head_dim: shapes (q is ``(batch, heads, q_len, head_dim)``).
      causal: the kernel's causal flag (top-left aligned, see the family contract).
      sm_scale: the kernel's ``sm_scale``; ``q`` is pre-scaled so logits stay O(1).
      bias: whether an attention bias ``ab`` of shape ``(batch, heads, q_len, kv_len)``
        is passed.
      q_segments, kv_segments: per batch row, ``(id, length)`` runs; both None or both set.
      block_*: the ``BlockSizes`` fields, forward and backward.
    """

    batch: int
    heads: int
    q_len: int
    kv_len: int
    head_dim: int
    causal: bool
    sm_scale: float
    bias: bool
    q_segments: tuple[Runs, ...] | None = None
    kv_segments: tuple[Runs, ...] | None = None
    block_b: int
    block_q: int
    block_k_major: int
    block_k: int
    block_q_major_dkv: int
    block_k_major_dkv: int
    block_k_dkv: int
    block_q_dkv: int
    block_k_major_dq: int
    block_k_dq: int
    block_q_dq: int

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("batch", "heads", "q_len", "kv_len", "head_dim"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.head_dim > 128 and self.head_dim % 128:
            raise ValueError(f"head_dim={self.head_dim} must be <= 128 or a multiple of 128")
        if not (math.isfinite(self.sm_scale) and self.sm_scale > 0):
            raise ValueError(f"sm_scale must be positive and finite, got {self.sm_scale}")
        if (self.q_segments is None) != (self.kv_segments is None):
            raise ValueError("q_segments and kv_segments must both be given or both be None")
        if self.q_segments is not None:
            _check_layout("q_segments", self.q_segments, self.batch, self.q_len)
            _check_layout("kv_segments", self.kv_segments, self.batch, self.kv_len)
        if not 1 <= self.block_b <= self.batch:
            raise ValueError(f"block_b={self.block_b} must be in [1, batch={self.batch}]")
        if not 1 <= self.block_q <= self.q_len:  # the forward q block need not divide
            raise ValueError(f"block_q={self.block_q} must be in [1, q_len={self.q_len}]")
        for q_block in ("block_q_major_dkv", "block_q_dq"):
            _divides(q_block, getattr(self, q_block), "q_len", self.q_len)
        _divides("block_q_dkv", self.block_q_dkv, "block_q_major_dkv", self.block_q_major_dkv)
        for major, minor in (
            ("block_k_major", "block_k"),
            ("block_k_major_dkv", "block_k_dkv"),
            ("block_k_major_dq", "block_k_dq"),
        ):
            _divides(major, getattr(self, major), "kv_len", self.kv_len)
            _divides(minor, getattr(self, minor), major, getattr(self, major))
            if getattr(self, minor) % KV_TILE:
                raise ValueError(f"{minor}={getattr(self, minor)} must be a multiple of {KV_TILE}")

    def shape_summary(self) -> str:
        """``q=(2,2,256,64) kv=512 causal seg bias sm_scale=0.125``."""
        flags = [
            "causal" if self.causal else "",
            "seg" if self.q_segments is not None else "",
            "bias" if self.bias else "",
        ]
        return " ".join(
            [f"q=({self.batch},{self.heads},{self.q_len},{self.head_dim}) kv={self.kv_len}"]
            + [f for f in flags if f]
            + [f"sm_scale={self.sm_scale:g}"]
        )

    def static_key(self) -> tuple[object, ...]:
        """What selects a compiled program: shapes, dtype, flags, block sizes (not the
        data, not the segment layout)."""
        return (
            self.dtype, self.batch, self.heads, self.q_len, self.kv_len, self.head_dim,
            self.causal, self.sm_scale, self.bias, self.q_segments is not None,
            tuple(sorted(self.block_sizes.items())),
        )

    @property
    def block_sizes(self) -> dict[str, int]:
        """The eleven ``BlockSizes`` fields by name."""
        return {name: getattr(self, name) for name in FWD_BLOCKS + BWD_BLOCKS}

    def segment_arrays(self) -> tuple[np.ndarray, np.ndarray] | None:
        """``(q ids (batch, q_len), kv ids (batch, kv_len))`` int32, or None."""
        if self.q_segments is None:
            return None
        return (
            np.stack([expand_runs(r) for r in self.q_segments]),
            np.stack([expand_runs(r) for r in self.kv_segments]),
        )

    def visible(self) -> np.ndarray:
        """``(batch, q_len, kv_len)`` bool: key j visible to query i (from the description)."""
        vis = np.ones((self.batch, self.q_len, self.kv_len), bool)
        segs = self.segment_arrays()
        if segs is not None:
            vis &= segs[0][:, :, None] == segs[1][:, None, :]
        if self.causal:
            vis &= np.arange(self.kv_len)[None, None, :] <= np.arange(self.q_len)[None, :, None]
        return vis

    def rows_without_keys(self) -> np.ndarray:
        """``(batch, q_len)`` bool: query rows that see no key at all."""
        return ~self.visible().any(axis=-1)

    def materialize(self) -> dict[str, np.ndarray]:
        """q, k, v, do (``do`` zero on rows that see no key), ab if ``bias``, and
        ``segment_ids_q``/``segment_ids_kv`` if segmented."""
        rng = self.rng()
        b, h, d = self.batch, self.heads, self.head_dim
        # sm_scale * q.k ~ N(0, 1) whatever sm_scale is, so softmax is neither flat nor one-hot.
        q_scale = 1.0 / (math.sqrt(d) * self.sm_scale)
        out = {
            "q": cast(rng.standard_normal((b, h, self.q_len, d)) * q_scale, self.dtype),
            "k": standard_normal(rng, (b, h, self.kv_len, d), self.dtype),
            "v": standard_normal(rng, (b, h, self.kv_len, d), self.dtype),
        }
        do = rng.standard_normal((b, h, self.q_len, d))
        # Rows outside the contract must not leak into dk/dv through the cotangent.
        do[np.broadcast_to(self.rows_without_keys()[:, None, :], do.shape[:3])] = 0.0
        out["do"] = cast(do, self.dtype)
        if self.bias:
            ab = rng.standard_normal((b, h, self.q_len, self.kv_len)) / self.sm_scale
            out["ab"] = cast(ab, self.dtype)
        segs = self.segment_arrays()
        if segs is not None:
            out["segment_ids_q"], out["segment_ids_kv"] = segs
        return out


# ---------------------------------------------------------------------------- strategies


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
    run in eight, whose id is drawn from ``[0, max_id + 1]`` and may see no key at all.
    Shrinks towards one run with the first visible id."""
    kv_ids = expand_runs(kv_runs)
    bounds = _cuts(draw, length, max_segments)
    runs = []
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        seen = kv_ids[: lo + 1] if causal else kv_ids
        if weighted(draw, ((True, 7), (False, 1))):
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


def _blocks_of(length: int, unit: int, max_blocks: int, largest: int) -> list[int]:
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
    majors = _blocks_of(length, unit, max_blocks, largest)
    grid = len(majors) > 1 and weighted(draw, ((False, 10 - p_grid), (True, p_grid)))
    major = draw(st.sampled_from(majors[1:])) if grid else majors[0]
    minors = [b for b in _blocks_of(major, unit, max_blocks, major) if b < major]
    sub = minors and weighted(draw, ((False, 10 - p_sub), (True, p_sub)))
    return major, (draw(st.sampled_from(minors)) if sub else major)


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
    axis.
    """
    # The choices that pick kernel paths come first: Hypothesis varies early choices most.
    single_tile = weighted(draw, ((False, 2), (True, 1)))  # forward block_k == kv_len
    causal = weighted(draw, ((False, 1), (True, 4)))
    segmented = draw(_mostly())
    bias = draw(_mostly())
    batch = weighted(draw, ((1, 2), (2, 3), (3, 5)))
    heads = draw(st.integers(1, max(1, min(2, max_batch_heads // batch))))
    # block_b: one, all of the batch, or (batch 3) 2, which leaves a partial last block.
    block_b = weighted(draw, ((1, 2), (batch, 4), (max(1, batch - 1), 4)))
    dtype = draw(st.sampled_from(dtypes))
    kv_len = weighted(draw, kv_lens if single_tile else tuple(
        (n, w) for n, w in kv_lens if n > KV_TILE))
    relation = weighted(draw, (("same", 3), ("shorter", 2), ("longer", 2)))
    others = [n for n in q_lens if (n < kv_len if relation == "shorter" else n > kv_len)]
    q_len = draw(st.sampled_from(others)) if relation != "same" and others else kv_len
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
            minor = draw(st.sampled_from(_blocks_of(kv_len, KV_TILE, max_blocks, kv_len)[1:]))
        blocks["block_k_major"], blocks["block_k"] = major, minor
    q_blocks = _blocks_of(q_len, Q_TILE, max_blocks, 256)
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
        dtype=dtype, seed=draw(st.integers(0, 2**31 - 1)), batch=batch, heads=heads,
        q_len=q_len, kv_len=kv_len, head_dim=head_dim, causal=causal, sm_scale=sm_scale,
        bias=bias, q_segments=q_segments, kv_segments=kv_segments, **blocks,
    )
    # A row that sees one key has exactly zero dq and dab; when nearly all rows are like
    # that, the rounding noise of those rows dominates the (tiny) scale of dq and no
    # relative error can judge it. Rare with matched layouts.
    seen = case.visible().sum(axis=-1)
    assume(4 * int((seen >= 2).sum()) >= int((seen >= 1).sum()))
    return case


def flash_events(case: FlashCase) -> list[str]:
    """Coverage labels of a case (what paths of the kernel it reaches)."""
    ev = [case.dtype, "causal" if case.causal else "non-causal"]
    if case.bias:
        ev.append("bias")
    if case.sm_scale != 1.0:
        ev.append("sm-scale")
    if case.q_segments is not None:
        ev.append("segments")
        ids = [i for row in case.q_segments + case.kv_segments for i, _ in row]
        if any(n == 1 for row in case.q_segments + case.kv_segments for _, n in row):
            ev.append("length-1-segment")
        if any(list(r) != sorted(r) for r in ([i for i, _ in row] for row in case.q_segments)):
            ev.append("unsorted-segment-ids")
        if len(set(ids)) > 1:
            ev.append("several-segments")
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
    if case.batch > 1:
        ev.append("batch>1")
    if case.heads > 1:
        ev.append("heads>1")
    if case.block_b > 1:
        ev.append("block_b>1")
    if case.block_b < case.batch:
        ev.append("block_b<batch")
    if case.batch % case.block_b:
        ev.append("partial-batch-block")
    if case.q_len != case.kv_len:
        ev.append("q-len<kv-len" if case.q_len < case.kv_len else "q-len>kv-len")
    if case.block_q_dkv < case.block_q_major_dkv or case.block_k_dkv < case.block_k_major_dkv:
        ev.append("dkv-subtiles")
    if case.block_k_dq < case.block_k_major_dq:
        ev.append("dq-subtiles")
    if case.kv_len // case.block_k_major_dkv > 1 and case.q_len // case.block_q_major_dkv > 1:
        ev.append("dkv-multi-block")
    if case.kv_len // case.block_k_major_dq > 1 and case.q_len // case.block_q_dq > 1:
        ev.append("dq-multi-block")
    if case.rows_without_keys().any():
        ev.append("rows-without-keys")
    return ev
