"""Cases of the GPU (Triton) flash attention ``mha`` and the strategy drawing them."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from hypothesis import strategies as st

from kernel_harness.core.case import (
    DTYPES,
    cast,
    check_heads,
    check_sizes,
    logit_scales_for,
    standard_normal,
)
from kernel_harness.families.gpu_common import TILE_SIZES, TritonCase, is_pow2
from kernel_harness.ops.attention.program import Definition
from kernel_harness.ops.attention.reference import visibility
from kernel_harness.ops.attention.segments import Runs, check_rows, stacked_ids

BLOCK_FIELDS: tuple[str, ...] = (
    "block_q", "block_k", "block_q_dkv", "block_kv_dkv", "block_q_dq", "block_kv_dq",
)
SCALE_MODES: tuple[str, ...] = ("arg", "prescaled-q")
#: A requested block this large is clamped by the kernel to the sequence length.
OVERSIZE_BLOCK = 256


@dataclasses.dataclass(frozen=True, kw_only=True)
class MhaCase(TritonCase):
    """One call of ``mha`` forward and backward.

    Attributes:
      batch, heads, q_len, kv_len, head_dim: shapes; q is [batch, q_len, heads, head_dim].
      causal: top-left aligned causal mask (query i sees keys j <= i).
      segment_runs: per batch row, ``(segment id, run length)`` pairs laying out the
        kernel's single ``segment_ids`` array (used for both queries and keys, so it
        needs ``q_len == kv_len``); ``None`` passes no segment ids.
      scale_mode: ``arg`` passes ``sm_scale=1/sqrt(head_dim)``; ``prescaled-q`` scales q
        in the data and passes ``sm_scale=1.0`` (the kernel skips its multiply then).
      block_*: the requested ``BlockSizes``; the kernel clamps each to its sequence length.
      num_warps, num_stages: Triton launch settings (accepted but unused in interpret mode).
    """

    batch: int
    q_heads: int
    q_len: int
    kv_len: int
    head_dim: int
    causal: bool = False
    segment_runs: tuple[Runs, ...] | None = None
    scale_mode: str = "arg"
    block_q: int = 32
    block_k: int = 32
    block_q_dkv: int = 32
    block_kv_dkv: int = 32
    block_q_dq: int = 32
    block_kv_dq: int = 32

    def __post_init__(self) -> None:
        super().__post_init__()
        check_sizes(self, "batch", "q_len", "kv_len")
        check_heads(self)
        if self.head_dim < 16:
            raise ValueError(f"head_dim must be >= 16 (a Triton dot operand), got {self.head_dim}")
        if self.scale_mode not in SCALE_MODES:
            raise ValueError(f"scale_mode must be one of {SCALE_MODES}, got {self.scale_mode!r}")
        for name in BLOCK_FIELDS:
            eff, length = self.effective_block(name), self._block_length(name)
            if not is_pow2(eff) or eff < 16 or length % eff:
                raise ValueError(
                    f"{name}={getattr(self, name)} clamps to {eff}, which must be a power of two "
                    f">= 16 dividing its sequence length {length} (the forward raises otherwise; "
                    "the backward does not check and silently computes wrong gradients)"
                )
        n_dq = self.q_len // self.effective_block("block_q_dq")
        n_dkv = self.kv_len // self.effective_block("block_kv_dkv")
        if n_dq != n_dkv:
            raise ValueError(
                f"the fused backward needs as many q blocks (block_q_dq: {n_dq}) as kv blocks "
                f"(block_kv_dkv: {n_dkv})"
            )
        if self.causal and self.q_len > self.kv_len:
            raise ValueError(
                f"causal needs q_len <= kv_len (got {self.q_len} > {self.kv_len}): the kernel's "
                "causal loop bound runs past the last key block otherwise"
            )
        if self.segment_runs is not None:
            if self.q_len != self.kv_len:
                raise ValueError("segment ids need q_len == kv_len (one array serves q and kv)")
            check_rows("segment_runs", self.segment_runs, self.batch, self.kv_len)

    def _block_length(self, name: str) -> int:
        return self.q_len if name in ("block_q", "block_q_dkv", "block_q_dq") else self.kv_len

    def effective_block(self, name: str) -> int:
        """The block size the kernel uses: the request clamped to the sequence length."""
        return min(getattr(self, name), self._block_length(name))

    @property
    def sm_scale(self) -> float:
        """The ``sm_scale`` passed to the kernel."""
        return 1.0 if self.scale_mode == "prescaled-q" else float(self.head_dim) ** -0.5

    def static_key(self) -> tuple[Any, ...]:
        """Everything but the seed and the segment layout (only its presence is static)."""
        return tuple(
            (f.name, getattr(self, f.name))
            for f in dataclasses.fields(self)
            if f.name not in ("seed", "segment_runs", "logit_scale")
        ) + (("segments", self.segment_runs is not None),)

    def shape_summary(self) -> str:
        return (
            f"q=({self.batch},{self.q_len},{self.q_heads},{self.head_dim}) kv_len={self.kv_len}"
        )

    def segment_ids(self) -> np.ndarray | None:
        """The int32 [batch, kv_len] segment ids laid out by ``segment_runs``."""
        if self.segment_runs is None:
            return None
        return stacked_ids(self.segment_runs)

    def visible(self) -> np.ndarray:
        """bool [batch, q_len, kv_len]: which key each query may see, by the attention op's
        dense-mask builder (top-left aligned causal, equal segment ids)."""
        seg = self.segment_ids()
        vis = visibility(self.q_len, self.kv_len, causal=self.causal,
                         segments=None if seg is None else (seg, seg), xp=np)[:, 0]
        return np.broadcast_to(vis, (self.batch, self.q_len, self.kv_len))

    def materialize(self) -> dict[str, np.ndarray]:
        """q, k, v, the cotangent ``do`` (all in ``dtype``) and, if any, ``segment_ids``."""
        rng = self.rng()
        q_shape = (self.batch, self.q_len, self.q_heads, self.head_dim)
        kv_shape = (self.batch, self.kv_len, self.q_heads, self.head_dim)
        q = rng.standard_normal(q_shape) * self.logit_scale
        if self.scale_mode == "prescaled-q":
            q = q * float(self.head_dim) ** -0.5
        arrays = {
            "q": cast(q, self.dtype),
            "k": standard_normal(rng, kv_shape, self.dtype),
            "v": standard_normal(rng, kv_shape, self.dtype),
            "do": standard_normal(rng, q_shape, self.dtype),
        }
        seg = self.segment_ids()
        if seg is not None:
            arrays["segment_ids"] = seg
        return arrays


def _pow2_blocks(length: int) -> list[int]:
    return [b for b in reversed(TILE_SIZES) if b <= length and length % b == 0]


def _length_pairs(lengths: tuple[int, ...]) -> list[tuple[int, int, tuple[int, ...]]]:
    """(q_len, kv_len, valid backward block counts) for every pair with at least one."""
    pairs = []
    for t in lengths:
        for s in lengths:
            counts = tuple(
                n for n in range(1, min(t, s) // 16 + 1)
                if t % n == 0 and s % n == 0 and is_pow2(t // n) and is_pow2(s // n)
                and t // n >= 16 and s // n >= 16
            )
            if counts:
                pairs.append((t, s, counts))
    return pairs


@st.composite
def _block(draw: st.DrawFn, length: int) -> int:
    """A power-of-two block dividing ``length`` (largest first); a full-length block is
    sometimes requested oversized so the kernel's clamp is exercised."""
    eff = draw(st.sampled_from(_pow2_blocks(length)))
    if eff == length and draw(st.booleans()):
        return OVERSIZE_BLOCK
    return eff


@st.composite
def _segment_runs(draw: st.DrawFn, length: int, max_runs: int) -> tuple[tuple[int, int], ...]:
    cuts = set(draw(st.lists(st.integers(1, length - 1), max_size=max_runs - 1)))
    # Length-1 segments: a cut on both sides of a few positions.
    for pos in draw(st.lists(st.integers(0, length - 1), max_size=2)):
        cuts |= {pos, pos + 1}
    cuts = sorted(cuts - {0, length})
    bounds = [0, *cuts, length]
    ids = draw(st.lists(st.integers(0, 3), min_size=len(bounds) - 1, max_size=len(bounds) - 1))
    return tuple((i, b - a) for i, a, b in zip(ids, bounds, bounds[1:], strict=False))


@st.composite
def mha_cases(
    draw: st.DrawFn,
    *,
    dtypes: tuple[str, ...] = DTYPES,
    lengths: tuple[int, ...] = (64, 32, 128, 96),
    head_dims: tuple[int, ...] = (32, 64, 48),
    max_batch: int = 2,
    max_heads: int = 2,
    max_segment_runs: int = 6,
) -> MhaCase:
    """Valid :class:`MhaCase` s.

    Draws q/kv lengths (equal or not; 96 is a non-power-of-two length, drawn 1 time in 4
    where one fits), a backward block
    count both lengths split into, forward and backward blocks independently (sometimes
    oversized so the kernel clamps them), causal, segment layouts with unsorted and
    repeated ids and length-1 runs, both scale modes, and a non-power-of-two head_dim (48,
    padded inside the kernel). Shrinks towards float32, one batch row and head, 64x64,
    head_dim 32, one block each, no mask.
    """
    dtype = draw(st.sampled_from(dtypes))
    unequal = draw(st.booleans())
    segments = not unequal and draw(st.booleans())
    causal = draw(st.booleans())
    pairs = [p for p in _length_pairs(lengths) if (p[0] != p[1]) == unequal]
    pairs.sort(key=lambda p: (lengths.index(p[0]), lengths.index(p[1])))
    # A non-power-of-two length (the kernel's padded last block) 1 time in 4: sorted last,
    # it was never drawn in a 30-example ci run.
    odd = [p for p in pairs if not (is_pow2(p[0]) and is_pow2(p[1]))]
    if odd and draw(st.integers(0, 3)) == 3:
        pairs = odd
    q_len, kv_len, counts = draw(st.sampled_from(pairs))
    if causal and q_len > kv_len:
        q_len, kv_len = kv_len, q_len
    batch = draw(st.integers(1, max_batch))
    n_bwd = draw(st.sampled_from(counts))
    bwd_q, bwd_kv = q_len // n_bwd, kv_len // n_bwd
    oversize = n_bwd == 1 and draw(st.booleans())
    runs = None
    if segments:
        runs = tuple(draw(_segment_runs(kv_len, max_segment_runs)) for _ in range(batch))
    return MhaCase(
        dtype=dtype,
        seed=draw(st.integers(0, 2**31 - 1)),
        batch=batch,
        q_heads=draw(st.integers(1, max_heads)),
        q_len=q_len,
        kv_len=kv_len,
        head_dim=draw(st.sampled_from(head_dims)),
        causal=causal,
        segment_runs=runs,
        scale_mode=draw(st.sampled_from(SCALE_MODES)),
        logit_scale=draw(st.sampled_from(logit_scales_for(dtype))),
        block_q=draw(_block(q_len)),
        block_k=draw(_block(kv_len)),
        block_q_dkv=draw(_block(q_len)),
        block_kv_dkv=OVERSIZE_BLOCK if oversize else bwd_kv,
        block_q_dq=OVERSIZE_BLOCK if oversize else bwd_q,
        block_kv_dq=draw(_block(kv_len)),
        num_warps=draw(st.sampled_from((None, None, 4, 8))),
        num_stages=draw(st.sampled_from((2, 1, 3))),
    )


def attention_definition(case: MhaCase) -> Definition:
    """The Triton kernel's softmax in the attention op's options: ``sm_scale * q.k^T``, lse
    in log base 2 (the kernel's residual); below float32 the magnitudes of the terms summed
    into dq and dk (the scale of their designed rounding)."""
    return Definition(layout="bqhd", scale=case.sm_scale, lse="base2",
                    magnitudes=("dq", "dk") if case.dtype != "float32" else ())
