"""The pointwise-attention op's cases (HSTU's vocabulary): a frozen description of one
call, and the Hypothesis strategy drawing them.

A case names shapes, block sizes, the mask (``causal``/``full``, or a numpy
mask described by ``mask_pattern``/``mask_density``/``mask_seed``), an
optional inclusive window and optional segment layouts given as runs
``((segment id, run length), ...)``. Arrays come from :meth:`HstuCase.materialize`.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from hypothesis import strategies as st

from kernel_harness.core.case import Case, standard_normal
from kernel_harness.ops.attention.segments import Runs, check_pair, check_runs, stacked_ids

LANES = 128
#: Largest default block: a ``None`` block size means ``min(DEFAULT_BLOCK, length)``.
DEFAULT_BLOCK = 512
MASK_KINDS = ("causal", "full", "numpy")
MASK_PATTERNS = ("random", "tiles", "rows")
BLOCK_FIELDS = (
    "block_q", "block_kv", "block_kv_compute", "block_q_dkv", "block_kv_dkv",
    "block_kv_dkv_compute",
)


def _positive(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class HstuCase(Case):
    """One HSTU attention call.

    Attributes:
      batch, heads, head_dim, q_len, kv_len: shapes (lengths multiples of 128).
      mask: ``causal`` (key j <= query i, top-left aligned), ``full`` or ``numpy``.
      mask_pattern, mask_density, mask_seed: the numpy mask's description (numpy only):
        ``random`` (each entry kept with probability density), ``tiles`` (each 128x128
        tile empty, full or random at density), ``rows`` (each row kept with probability
        density, then half its entries).
      window: inclusive sliding window ``|i - j| <= window``, or None.
      q_segments, kv_segments: segment runs ``((id, length), ...)`` (both or neither);
        batch row b gives run r the id of run ``(r + b) % runs``.
      scale: logit scale or None for ``1/sqrt(head_dim)``.
      block_*: the kernel's block sizes (None: the kernel's default).
    """

    batch: int = 1
    q_heads: int = 1
    head_dim: int = 64
    q_len: int = 128
    kv_len: int = 128
    mask: str = "causal"
    mask_pattern: str | None = None
    mask_density: float | None = None
    mask_seed: int | None = None
    window: int | None = None
    q_segments: Runs | None = None
    kv_segments: Runs | None = None
    scale: float | None = None
    block_q: int | None = None
    block_kv: int | None = None
    block_kv_compute: int | None = None
    block_q_dkv: int | None = None
    block_kv_dkv: int | None = None
    block_kv_dkv_compute: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("batch", "q_heads", "head_dim", "q_len", "kv_len"):
            _positive(name, getattr(self, name))
        for name in ("q_len", "kv_len"):
            if getattr(self, name) % LANES:
                raise ValueError(f"{name} must be a multiple of {LANES}, got {getattr(self, name)}")
        if self.mask not in MASK_KINDS:
            raise ValueError(f"mask must be one of {MASK_KINDS}, got {self.mask!r}")
        described = (self.mask_pattern, self.mask_density, self.mask_seed)
        if self.mask == "numpy":
            if self.mask_pattern not in MASK_PATTERNS:
                raise ValueError(f"mask_pattern must be one of {MASK_PATTERNS}")
            if self.mask_density is None or not 0.0 <= self.mask_density <= 1.0:
                raise ValueError(f"mask_density must be in [0, 1], got {self.mask_density}")
            if self.mask_seed is None or self.mask_seed < 0:
                raise ValueError(f"mask_seed must be an int >= 0, got {self.mask_seed}")
        elif described != (None, None, None):
            raise ValueError("mask_pattern/mask_density/mask_seed describe numpy masks only")
        if self.window is not None and (not isinstance(self.window, int) or self.window < 0):
            raise ValueError(f"window must be an int >= 0 or None, got {self.window!r}")
        check_pair(self.q_segments, self.kv_segments)
        if self.q_segments is not None:
            check_runs("q_segments", self.q_segments, self.q_len)
            check_runs("kv_segments", self.kv_segments, self.kv_len)
        if self.scale is not None and not (math.isfinite(self.scale) and self.scale > 0):
            raise ValueError(f"scale must be a positive finite float, got {self.scale}")
        blocks = resolved_blocks(self)
        for name, whole in (
            ("block_q", self.q_len), ("block_kv", self.kv_len),
            ("block_kv_compute", blocks["block_kv"]), ("block_q_dkv", self.q_len),
            ("block_kv_dkv", self.kv_len), ("block_kv_dkv_compute", blocks["block_kv_dkv"]),
        ):
            size = blocks[name]
            _positive(name, size)
            if size % LANES or whole % size:
                raise ValueError(f"{name}={size} must be a multiple of {LANES} dividing {whole}")

    def materialize(self) -> dict[str, np.ndarray]:
        """q, k, v, the cotangent do (standard normal, dtype-rounded), and, as the
        case asks, the numpy ``mask`` and int32 ``q_segment_ids``/``kv_segment_ids``."""
        rng = self.rng(0)
        q_shape = (self.batch, self.q_len, self.q_heads, self.head_dim)
        kv_shape = (self.batch, self.kv_len, self.q_heads, self.head_dim)
        arrays = {
            "q": standard_normal(rng, q_shape, self.dtype),
            "k": standard_normal(rng, kv_shape, self.dtype),
            "v": standard_normal(rng, kv_shape, self.dtype),
            "do": standard_normal(rng, q_shape, self.dtype),
        }
        if self.mask == "numpy":
            arrays["mask"] = numpy_mask(self)
        if self.q_segments is not None:
            arrays["q_segment_ids"] = expand_runs(self.q_segments, self.batch)
            arrays["kv_segment_ids"] = expand_runs(self.kv_segments, self.batch)
        return arrays


def resolved_blocks(case: HstuCase) -> dict[str, int]:
    """The case's block sizes with the kernel's documented defaults filled in."""
    b = {name: getattr(case, name) for name in BLOCK_FIELDS}
    for name, length in (("block_q", case.q_len), ("block_kv", case.kv_len),
                         ("block_q_dkv", case.q_len), ("block_kv_dkv", case.kv_len)):
        b[name] = min(DEFAULT_BLOCK, length) if b[name] is None else b[name]
    for compute, memory in (("block_kv_compute", "block_kv"),
                            ("block_kv_dkv_compute", "block_kv_dkv")):
        b[compute] = b[memory] if b[compute] is None else b[compute]
    return b


def expand_runs(runs: Runs, batch: int) -> np.ndarray:
    """``[batch, length]`` int32 ids; row b gives run r the id of run ``(r + b) % len(runs)``."""
    ids = [i for i, _ in runs]
    return stacked_ids([tuple((ids[(r + b) % len(runs)], n) for r, (_, n) in enumerate(runs))
                        for b in range(batch)])


def numpy_mask(case: HstuCase) -> np.ndarray:
    """The ``[q_len, kv_len]`` bool mask a numpy case describes (deterministic)."""
    rng = np.random.default_rng((case.mask_seed, 12345))
    shape, density = (case.q_len, case.kv_len), case.mask_density
    if case.mask_pattern == "random":
        return rng.random(shape) < density
    if case.mask_pattern == "rows":
        return (rng.random((case.q_len, 1)) < density) & (rng.random(shape) < 0.5)
    tiles = (case.q_len // LANES, case.kv_len // LANES)
    state = rng.choice(3, size=tiles, p=(0.5, 0.25, 0.25))  # empty / full / random
    noise = rng.random(shape) < density
    per_entry = np.kron(state, np.ones((LANES, LANES), np.int64))
    return (per_entry == 1) | ((per_entry == 2) & noise)


# ----------------------------------------------------------------------------- strategies


def _block_choices(whole: int, max_block: int, repeat: int = 3) -> list[int | None]:
    """None (the default) first, then the 128-multiples dividing ``whole``; blocks
    smaller than ``whole`` are listed ``repeat`` times so that several blocks are common."""
    sizes = [b for b in range(LANES, min(whole, max_block) + 1, LANES) if whole % b == 0]
    smaller = [b for b in sizes if b < whole]
    return [None, *(smaller * repeat), *(b for b in sizes if b == whole)]


@st.composite
def _blocks(draw: st.DrawFn, q_len: int, kv_len: int, max_block: int) -> dict[str, int | None]:
    """Forward and backward blocks, drawn independently; shrinks to the defaults."""
    out: dict[str, int | None] = {}
    for q_name, kv_name, c_name in (
        ("block_q", "block_kv", "block_kv_compute"),
        ("block_q_dkv", "block_kv_dkv", "block_kv_dkv_compute"),
    ):
        out[q_name] = draw(st.sampled_from(_block_choices(q_len, max_block)))
        out[kv_name] = draw(st.sampled_from(_block_choices(kv_len, max_block)))
        kv_block = out[kv_name] or min(DEFAULT_BLOCK, kv_len)
        out[c_name] = draw(st.sampled_from(_block_choices(kv_block, kv_block, repeat=5)))
    return out


@st.composite
def _runs(draw: st.DrawFn, length: int, *, max_runs: int, max_id: int) -> Runs:
    """Segment runs covering ``length``; shrinks towards one segment of id 0.
    Cut points favour block edges (+-1), ids are unsorted, a length-1 run is common."""
    edges = sorted({p for b in range(LANES, length, LANES) for p in (b - 1, b, b + 1)})
    cut = st.one_of(st.integers(1, length - 1), st.sampled_from(edges or [1]))
    cuts = set(draw(st.lists(cut, max_size=max_runs - 1)))
    if cuts and draw(st.booleans()):  # a length-1 segment right after the first cut
        first = min(cuts)
        if first + 1 < length:
            cuts.add(first + 1)
    bounds = [0, *sorted(c for c in cuts if 0 < c < length), length]
    ids = draw(st.lists(st.integers(0, max_id), min_size=len(bounds) - 1, max_size=len(bounds) - 1))
    return tuple((i, hi - lo) for i, lo, hi in zip(ids, bounds, bounds[1:], strict=False))


@st.composite
def hstu_cases(
    draw: st.DrawFn,
    *,
    dtypes: tuple[str, ...] = ("float32", "bfloat16"),
    lengths: tuple[int, ...] = (256, 128, 384, 512),
    max_batch: int = 2,
    max_heads: int = 2,
    head_dims: tuple[int, ...] = (64, 128),
    max_block: int = 512,
    max_segments: int = 4,
) -> HstuCase:
    """Draws an :class:`HstuCase`; shrinks towards float32, one batch and head, equal
    lengths of ``lengths[0]`` (256: two 128-blocks possible), causal, no window, no
    segments, default scale and blocks."""
    q_len = draw(st.sampled_from(lengths))
    kv_len = q_len if draw(st.booleans()) else draw(st.sampled_from(lengths))
    blocks = draw(_blocks(q_len, kv_len, max_block))
    mask = draw(st.sampled_from(MASK_KINDS))
    numpy_desc: dict[str, object] = {}
    if mask == "numpy":
        numpy_desc = {
            "mask_pattern": draw(st.sampled_from(MASK_PATTERNS)),
            "mask_density": draw(st.sampled_from((0.5, 0.05, 0.95, 0.0, 1.0))),
            "mask_seed": draw(st.integers(0, 2**16)),
        }
    window = None
    window_kind = draw(st.sampled_from(("none", "edge", "any")))
    longest = max(q_len, kv_len)
    if window_kind == "edge":
        sizes = {blocks[n] or min(DEFAULT_BLOCK, q_len) for n in ("block_q", "block_q_dkv")}
        sizes |= {LANES, blocks["block_kv"] or min(DEFAULT_BLOCK, kv_len)}
        window = draw(st.sampled_from(sorted(
            {0, 1, longest - 1, longest, longest + 100} | {b + e for b in sizes for e in (-1, 0, 1)}
        )))
    elif window_kind == "any":
        window = draw(st.integers(0, longest))
    q_segments = kv_segments = None
    seg_kind = draw(st.sampled_from(("none", "shared", "independent")))
    if seg_kind != "none":
        q_segments = draw(_runs(q_len, max_runs=max_segments, max_id=max_segments - 1))
        if seg_kind == "shared" and kv_len == q_len:
            kv_segments = q_segments
        else:
            kv_segments = draw(_runs(kv_len, max_runs=max_segments, max_id=max_segments - 1))
    head_dim = draw(st.sampled_from(head_dims))
    factor = draw(st.sampled_from((None, 0.5, 2.0)))
    return HstuCase(
        dtype=draw(st.sampled_from(dtypes)),
        seed=draw(st.integers(0, 2**31 - 1)),
        batch=draw(st.integers(1, max_batch)),
        q_heads=draw(st.integers(1, max_heads)),
        head_dim=head_dim,
        q_len=q_len,
        kv_len=kv_len,
        mask=mask,
        window=window,
        q_segments=q_segments,
        kv_segments=kv_segments,
        scale=None if factor is None else factor / math.sqrt(head_dim),
        **numpy_desc,
        **blocks,
    )


def hstu_seed_cases(without: frozenset[str] = frozenset()) -> tuple[HstuCase, ...]:
    """The case every hstu matches-reference run tries first: causal with a window, kv
    blocks split into compute sub-blocks in the forward (512 = 4 x 128) and the backward
    (256 = 2 x 128), so the mask's diagonal falls inside later sub-blocks; two batch rows,
    two heads, unsorted segments cut off the block edges (one of length 1). A derandomized
    20-example run once drew no case where forgetting the sub-block offset shows."""
    del without  # hstu declares no optional features
    return (HstuCase(
        dtype="float32", seed=7, batch=2, q_heads=2, head_dim=64, q_len=512, kv_len=512,
        mask="causal", window=200,
        q_segments=((2, 129), (0, 1), (1, 255), (3, 127)),
        kv_segments=((2, 129), (0, 1), (1, 255), (3, 127)),
        block_q=128, block_kv=512, block_kv_compute=128,
        block_q_dkv=128, block_kv_dkv=256, block_kv_dkv_compute=128,
    ),)
