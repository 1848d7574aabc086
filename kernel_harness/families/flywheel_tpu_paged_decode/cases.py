"""Cases of flywheel-tpu's paged decode (``flash_attn_with_kvcache`` with a block table)
and the strategy drawing them, in the paged op's vocabulary
(:class:`~kernel_harness.ops.paged_attention.strategy.PagedGeometry`).

The library's conventions fix part of the case: bfloat16 only, 128-token pages, one merged
cache ``[pages, 128, 2 * kv_heads, head_dim]`` (K of kv head h in row 2h, V in 2h + 1).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np
from hypothesis import strategies as st

from kernel_harness.core.case import Case, cast, check_logit_scale, check_sizes
from kernel_harness.families.flywheel_tpu import merged_cache
from kernel_harness.ops.paged_attention.layout import unseen_past_lengths
from kernel_harness.ops.paged_attention.reference import visible_lengths
from kernel_harness.ops.paged_attention.strategy import (
    PagedGeometry,
    draw_geometry,
    edge_lengths,
)

#: The library's page size (``PAGE_SIZE_MULTIPLE``; larger multiples are not drawn).
PAGE_SIZE = 128
#: What the slots past each row's length hold: ``masked`` K = 0 and V = +-MASKED_V (a
#: leak shows as a large error); ``nan`` NaN in K and V (memory never written).
PAST_LENGTH = ("masked", "nan")
#: Features a kernel may lack (``--without``; the project's known-bugs entry uses it).
OPTIONAL: dict[str, str] = {
    "nan-past-lengths": "the cache slots past a row's cache_seqlens hold finite values "
                        "(no NaN): drawn K = 0, V = +-1e3 there only"}


@dataclasses.dataclass(frozen=True, kw_only=True)
class FlywheelDecodeCase(PagedGeometry, Case):
    """One decode step: one query per row over its pages.

    Attributes:
      lengths: ``cache_seqlens`` (0 allowed, up to the row's capacity).
      scale: ``softmax_scale`` (None: 1/sqrt(head_dim)).
      window_left: ``window_size[0]`` (None: -1, unbounded): the query, at position
        length - 1, sees keys t >= length - 1 - window_left.
      past_length: what the slots past each row's length hold (:data:`PAST_LENGTH`).
      logit_scale: q drawn ~N(0, logit_scale^2), so the logits are ~N(0, logit_scale^2)
        at the default scale.
    """

    lengths: tuple[int, ...]
    scale: float | None = None
    window_left: int | None = None
    past_length: str = "masked"
    logit_scale: float = 1.0

    #: Only the data changes with these: the program is the same.
    DYNAMIC_FIELDS: ClassVar[frozenset[str]] = frozenset(
        {"seed", "shuffle", "past_length", "logit_scale"})

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.dtype != "bfloat16":
            raise ValueError("flywheel-tpu's decode is bfloat16 only")
        check_sizes(self, "batch", "q_heads", "kv_heads", "head_dim", "pages_per_seq")
        self.check_paged()
        if self.page_size != PAGE_SIZE:
            raise ValueError(f"page_size must be {PAGE_SIZE} (the library's pages)")
        if len(self.lengths) != self.batch or not all(
                0 <= n <= self.capacity for n in self.lengths):
            raise ValueError(f"one length per row, each in [0, {self.capacity}]")
        if self.window_left is not None and self.window_left < 0:
            raise ValueError("window_left must be >= 0 (None: unbounded)")
        check_logit_scale(self.logit_scale)
        if self.past_length not in PAST_LENGTH:
            raise ValueError(f"past_length must be one of {PAST_LENGTH}")

    @property
    def total_pages(self) -> int:
        """Every row's own pages, then the spare ones."""
        return self.batch * self.pages_per_seq + self.spare_pages

    @property
    def softmax_scale(self) -> float:
        """The scale the library applies (its default 1/sqrt(head_dim))."""
        return self.head_dim**-0.5 if self.scale is None else self.scale

    def visible(self) -> np.ndarray:
        """bool [batch, capacity]: the keys each row's query sees (t < length, and with
        a window t >= length - 1 - window_left: bottom-right, the query is the last)."""
        mask = visible_lengths(np.asarray(self.lengths), self.capacity)
        if self.window_left is not None:
            t = np.arange(self.capacity)
            mask &= t[None] >= np.asarray(self.lengths)[:, None] - 1 - self.window_left
        return mask

    def shape_summary(self) -> str:
        return f"{self.paged_shape()} lengths={list(self.lengths)}"

    def materialize(self) -> dict[str, np.ndarray]:
        """q [batch, q_heads, head_dim] (unscaled: the library scales it), the merged
        cache, cache_seqlens and the block table; the slots past each row's length hold
        :attr:`past_length`'s values (a window's slots before it hold real tokens)."""
        rng = self.rng()
        q = rng.standard_normal((self.batch, self.q_heads, self.head_dim)) * self.logit_scale
        table = self.page_table(rng, lambda b, j: False, 0)
        shape = (self.kv_heads, self.total_pages, self.page_size, self.head_dim)
        seen = ~unseen_past_lengths(table, self.total_pages, self.page_size, self.lengths)
        merged = merged_cache.poisoned_pages(rng, shape, seen, self.past_length == "nan")
        return {"q": cast(q, self.dtype), "kv_cache": cast(merged, self.dtype),
                "cache_seqlens": np.asarray(self.lengths, np.int32), "block_table": table}

    def static_key(self) -> tuple[Any, ...]:
        """Every field but the data ones and the lengths (operands of the program)."""
        return tuple((f.name, getattr(self, f.name)) for f in dataclasses.fields(self)
                     if f.name not in self.DYNAMIC_FIELDS | {"lengths"})


@st.composite
def flywheel_decode_cases(draw: st.DrawFn, *, without: frozenset[str] = frozenset(),
                          max_batch: int = 3) -> FlywheelDecodeCase:
    """Valid :class:`FlywheelDecodeCase` s: 1-3 rows of 1-3 pages, lengths on and next to
    page edges (0 and full included), 1-3 kv heads in groups of 1, 2 or 4 (MHA, GQA,
    MQA), head_dim 128 or 64, spare and shuffled pages, soft caps, explicit scales,
    left windows, and the slots past the lengths masked or NaN (unless ``without``
    nan-past-lengths). Shrinks towards one row of one page, MHA, masked slots."""
    batch = draw(st.integers(1, max_batch))
    kv_heads = draw(st.sampled_from((1, 2, 3)))
    pages_per_seq = draw(st.integers(1, 3))
    capacity = pages_per_seq * PAGE_SIZE
    fields = dict(
        dtype="bfloat16",
        **draw_geometry(draw, batch=batch, kv_heads=kv_heads, groups=(1, 2, 4),
                        head_dims=(128, 64), page_size=PAGE_SIZE, pages_per_seq=pages_per_seq),
        lengths=draw(edge_lengths(batch, capacity, PAGE_SIZE)),
        spare_pages=draw(st.integers(0, 2)),
        shuffle=draw(st.booleans()),
        soft_cap=draw(st.sampled_from((None, None, 5.0, 30.0))),
        scale=draw(st.sampled_from((None, None, 0.05, 0.3))),
        window_left=draw(st.sampled_from((None, None, 0, 7, 128, 200))),
        past_length=("masked" if "nan-past-lengths" in without
                     else draw(st.sampled_from(PAST_LENGTH))),
        logit_scale=draw(st.sampled_from((1.0, 1.0, 4.0, 16.0))),
    )
    return FlywheelDecodeCase(**fields)
