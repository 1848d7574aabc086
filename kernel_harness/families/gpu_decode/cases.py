"""Cases of the GPU (Triton) decode attention (``gqa``/``mqa``) and the strategy drawing them."""

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
from kernel_harness.families.gpu_common import TritonCase, is_pow2
from kernel_harness.ops.attention.program import Definition
from kernel_harness.ops.attention.reference import visibility

SCALE_MODES: tuple[str, ...] = ("default", "arg", "prescaled-q")
ENTRIES: tuple[str, ...] = ("gqa", "mqa")

Bound = int | tuple[int, ...] | None


@dataclasses.dataclass(frozen=True, kw_only=True)
class DecodeCase(TritonCase):
    """One decode step: a single query token per batch row against a kv cache.

    Attributes:
      batch, q_heads, kv_heads, kv_len, head_dim: q is [batch, q_heads, head_dim], k and v
        are [batch, kv_len, kv_heads, head_dim]; q head h uses kv head h // (q_heads //
        kv_heads).
      start: the kernel's ``start_idx``: first visible key, a scalar (broadcast), one per
        batch row, or ``None``.
      end: the kernel's ``kv_seq_len``: one past the last visible key, same forms.
      scale_mode: ``default`` passes ``sm_scale=None`` (the kernel uses 1/sqrt(head_dim)),
        ``arg`` passes 1/sqrt(head_dim), ``prescaled-q`` scales q and passes 1.0.
      entry: ``gqa`` or ``mqa`` (the latter needs ``kv_heads == 1``).
      normalize_output: the kernel's flag; when False ``out`` is sum_j exp(s_j - m) v_j
        with m the row's largest visible logit.
      block_h, block_k, k_splits, num_warps, num_stages: kernel tiling and launch settings.
    """

    batch: int
    q_heads: int
    kv_heads: int
    kv_len: int
    head_dim: int
    start: Bound = None
    end: Bound = None
    scale_mode: str = "default"
    entry: str = "gqa"
    normalize_output: bool = True
    block_h: int = 16
    block_k: int = 32
    k_splits: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        check_sizes(self, "batch", "kv_len", "k_splits")
        check_heads(self)
        if self.scale_mode not in SCALE_MODES:
            raise ValueError(f"scale_mode must be one of {SCALE_MODES}, got {self.scale_mode!r}")
        if self.entry not in ENTRIES:
            raise ValueError(f"entry must be one of {ENTRIES}, got {self.entry!r}")
        if self.entry == "mqa" and self.kv_heads != 1:
            raise ValueError("entry 'mqa' needs kv_heads == 1")
        for name in ("head_dim", "block_h", "block_k"):
            if not is_pow2(getattr(self, name)) or getattr(self, name) < 16:
                raise ValueError(f"{name} must be a power of two >= 16 (a Triton tile)")
        split, rem = divmod(self.kv_len, self.k_splits)
        if rem or not is_pow2(split) or split < 16:
            raise ValueError(
                f"kv_len={self.kv_len} must split into k_splits={self.k_splits} power-of-two "
                "parts of at least 16 keys (the kernel asserts this)"
            )
        for name in ("start", "end"):
            value = getattr(self, name)
            values = () if value is None else (value,) if isinstance(value, int) else value
            if not isinstance(value, (int, type(None))) and len(values) != self.batch:
                raise ValueError(f"{name} needs one entry per batch row ({self.batch})")
            if any(not 0 <= x <= self.kv_len for x in values):
                raise ValueError(f"{name} values must lie in [0, kv_len={self.kv_len}]")

    @property
    def split_len(self) -> int:
        return self.kv_len // self.k_splits

    @property
    def group(self) -> int:
        """Query heads per kv head."""
        return self.q_heads // self.kv_heads

    @property
    def sm_scale(self) -> float | None:
        """The ``sm_scale`` passed to the kernel."""
        return {"default": None, "arg": self.head_dim**-0.5, "prescaled-q": 1.0}[self.scale_mode]

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Per batch row (start, end) of the visible keys [start, end)."""
        def per_row(value: Bound, default: int) -> np.ndarray:
            if value is None:
                value = default
            return np.broadcast_to(np.asarray(value, np.int64), (self.batch,))

        return per_row(self.start, 0), per_row(self.end, self.kv_len)

    def visible(self) -> np.ndarray:
        """bool [batch, kv_len]: key j is visible to row b iff start_b <= j < end_b (the
        attention op's dense-mask builder, one query per row)."""
        start, end = self.bounds()
        return visibility(1, self.kv_len, kv_starts=start, kv_lengths=end, xp=np)[:, 0, 0]

    def static_key(self) -> tuple[Any, ...]:
        """All fields but the seed and the bound values (their form stays static)."""
        def form(v: Bound) -> str:
            return "none" if v is None else "scalar" if isinstance(v, int) else "per-row"

        return tuple(
            (f.name, getattr(self, f.name))
            for f in dataclasses.fields(self)
            if f.name not in ("seed", "start", "end", "logit_scale")
        ) + (("start", form(self.start)), ("end", form(self.end)))

    def shape_summary(self) -> str:
        return (
            f"q=({self.batch},{self.q_heads},{self.head_dim}) "
            f"kv=({self.batch},{self.kv_len},{self.kv_heads},{self.head_dim})"
        )

    def materialize(self) -> dict[str, np.ndarray]:
        """q, k, v in ``dtype`` and the int32 ``start_idx``/``kv_seq_len`` when given."""
        rng = self.rng()
        q = rng.standard_normal((self.batch, self.q_heads, self.head_dim)) * self.logit_scale
        if self.scale_mode == "prescaled-q":
            q = q * self.head_dim**-0.5
        kv_shape = (self.batch, self.kv_len, self.kv_heads, self.head_dim)
        arrays = {
            "q": cast(q, self.dtype),
            "k": standard_normal(rng, kv_shape, self.dtype),
            "v": standard_normal(rng, kv_shape, self.dtype),
        }
        if self.start is not None:
            arrays["start_idx"] = np.asarray(self.start, np.int32)
        if self.end is not None:
            arrays["kv_seq_len"] = np.asarray(self.end, np.int32)
        return arrays


@st.composite
def _bound_value(draw: st.DrawFn, kv_len: int, edges: tuple[int, ...]) -> int:
    """A position in [0, kv_len], often on or next to a block or split edge."""
    near = sorted({e + d for e in edges for d in (-1, 0, 1) if 0 <= e + d <= kv_len})
    return draw(st.one_of(st.sampled_from(near), st.integers(0, kv_len)))


@st.composite
def _bound(draw: st.DrawFn, batch: int, kv_len: int, edges: tuple[int, ...]) -> Bound:
    form = draw(st.sampled_from(("none", "per-row", "scalar")))
    if form == "none":
        return None
    if form == "scalar":
        return draw(_bound_value(kv_len, edges))
    return tuple(draw(_bound_value(kv_len, edges)) for _ in range(batch))


@st.composite
def decode_cases(
    draw: st.DrawFn,
    *,
    dtypes: tuple[str, ...] = DTYPES,
    max_batch: int = 2,
    groups: tuple[int, ...] = (1, 4, 16, 3, 20, 32),
    kv_head_counts: tuple[int, ...] = (1, 2, 4),
    split_lens: tuple[int, ...] = (32, 16, 64, 128),
    k_split_counts: tuple[int, ...] = (1, 2, 4),
    head_dims: tuple[int, ...] = (32, 64, 16),
) -> DecodeCase:
    """Valid :class:`DecodeCase` s.

    Draws MHA/GQA/MQA head layouts (groups larger than ``block_h`` and not a multiple of
    it), 1-4 kv splits of 16-128 keys, block_k below, at and above the split length,
    start/end bounds as None, a scalar or one per row, often at block/split edges
    (empty rows and one-key rows included), both normalizations and all scale modes.
    Shrinks towards float32, batch 1, one kv head and one q head, one split of 32 keys,
    no bounds.
    """
    batch = draw(st.integers(1, max_batch))
    kv_heads = draw(st.sampled_from(kv_head_counts))
    group = draw(st.sampled_from(groups))
    k_splits = draw(st.sampled_from(k_split_counts))
    split = draw(st.sampled_from(split_lens))
    kv_len = k_splits * split
    block_k = draw(st.sampled_from((32, 16, 64, 256)))
    step = min(block_k, split)
    edges = tuple(range(0, kv_len + 1, step))
    start, end = draw(_bound(batch, kv_len, edges)), draw(_bound(batch, kv_len, edges))
    # Mostly ordered bounds, so empty rows stay a minority.
    if isinstance(start, int) and isinstance(end, int) and draw(st.booleans()):
        start, end = min(start, end), max(start, end)
    elif isinstance(start, tuple) and isinstance(end, tuple) and draw(st.booleans()):
        start, end = (
            tuple(map(min, start, end)), tuple(map(max, start, end))
        )
    dtype = draw(st.sampled_from(dtypes))
    return DecodeCase(
        dtype=dtype,
        seed=draw(st.integers(0, 2**31 - 1)),
        batch=batch,
        q_heads=group * kv_heads,
        kv_heads=kv_heads,
        kv_len=kv_len,
        head_dim=draw(st.sampled_from(head_dims)),
        start=start,
        end=end,
        scale_mode=draw(st.sampled_from(SCALE_MODES)),
        logit_scale=draw(st.sampled_from(logit_scales_for(dtype))),
        entry=draw(st.sampled_from(ENTRIES)) if kv_heads == 1 else "gqa",
        normalize_output=draw(st.booleans()),
        block_h=draw(st.sampled_from((16, 32))),
        block_k=block_k,
        k_splits=k_splits,
        num_warps=draw(st.sampled_from((None, None, 4, 8))),
        num_stages=draw(st.sampled_from((2, 1, 3))),
    )


def attention_definition(case: DecodeCase) -> Definition:
    """The decode kernel's softmax in the attention op's options: one query per row, scale
    1/sqrt(head_dim) (1 for a prescaled q), the natural lse, the denominator dividing the
    output, or not at all without ``normalize_output``."""
    scale = case.head_dim**-0.5 if case.scale_mode != "prescaled-q" else 1.0
    return Definition(layout="bqhd", scale=scale, lse="natural",
                    normalize="output" if case.normalize_output else "none")
