"""Cases of the GPU (Triton) paged attention and the strategy drawing them.

A case describes the page layout (page size, pages per sequence, shared prefix pages,
spare pages, shuffling) and the lengths; :meth:`PagedCase.materialize` builds the page
pool and block tables and poisons every slot a correct kernel must not use.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from hypothesis import strategies as st

from kernel_harness.core.case import DTYPES, cast, check_sizes, logit_scales_for
from kernel_harness.families.gpu_common import TritonCase, is_pow2
from kernel_harness.ops.paged_attention.strategy import (
    MASKED_V as MASKED_V,  # re-exported: the value tests and goldens speak of
)
from kernel_harness.ops.paged_attention.strategy import (
    PagedGeometry,
    draw_geometry,
    edge_lengths,
    poison_float,
    slot_masks,
)

#: Quantized V of masked tokens: int8 extreme times this scale (about MASKED_V).
MASKED_V_SCALE = 8.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class PagedCase(PagedGeometry, TritonCase):
    """One paged decode step (the page table is the kernel's block table; the vocabulary's
    fields: :class:`~kernel_harness.ops.paged_attention.strategy.PagedGeometry`).

    Attributes:
      lengths: tokens per row (``None``: no ``lengths`` argument, every listed token counts).
      shared_pages: leading block-table entries all rows share (one physical page each).
      quantized: int8 pages with float32 per-token ``k_scales_pages``/``v_scales_pages``.
      block_h, pages_per_compute_block, k_splits, num_warps, num_stages: kernel settings.
    """

    lengths: tuple[int, ...] | None = None
    shared_pages: int = 0
    quantized: bool = False
    block_h: int = 16
    pages_per_compute_block: int = 1
    k_splits: int = 1
    num_warps: int | None = 8

    def __post_init__(self) -> None:
        super().__post_init__()
        check_sizes(self, "batch", "q_heads", "kv_heads", "pages_per_seq", "k_splits",
                    "pages_per_compute_block")
        self.check_paged()
        for name in ("head_dim", "page_size", "pages_per_seq", "pages_per_compute_block",
                     "block_h"):
            if not is_pow2(getattr(self, name)):
                raise ValueError(f"{name} must be a power of two, got {getattr(self, name)}")
        if self.head_dim < 16 or self.block_h % 16:
            raise ValueError("head_dim must be >= 16 and block_h a multiple of 16")
        if self.pages_per_seq % self.k_splits:
            raise ValueError(f"pages_per_seq must be a multiple of k_splits={self.k_splits}")
        if self.block_k < 16:
            raise ValueError(
                f"a compute block of {self.compute_pages} pages x {self.page_size} tokens is "
                "under 16 keys (a Triton dot operand)"
            )
        if self.lengths is not None:
            if len(self.lengths) != self.batch:
                raise ValueError(f"lengths needs one entry per batch row ({self.batch})")
            if any(not 0 <= n <= self.capacity for n in self.lengths):
                raise ValueError(f"lengths must lie in [0, {self.capacity}]")
        if not 0 <= self.shared_pages <= min(self.used_pages(b) for b in range(self.batch)):
            raise ValueError("shared_pages must be full pages of every row")

    @property
    def pages_per_partition(self) -> int:
        return self.pages_per_seq // self.k_splits

    @property
    def compute_pages(self) -> int:
        """Pages per compute block after the kernel's clamp to the partition."""
        return min(self.pages_per_compute_block, self.pages_per_partition)

    @property
    def block_k(self) -> int:
        return self.compute_pages * self.page_size

    @property
    def total_pages(self) -> int:
        return self.batch * self.pages_per_seq - (self.batch - 1) * self.shared_pages + (
            self.spare_pages
        )

    def length(self, b: int) -> int:
        return self.capacity if self.lengths is None else self.lengths[b]

    def used_pages(self, b: int) -> int:
        """Pages holding row b's tokens (whole pages only count for ``shared_pages``)."""
        if self.lengths is None:
            return self.pages_per_seq
        return self.lengths[b] // self.page_size

    def read_pages(self, b: int) -> int:
        """Table entries of row b the kernel reads: whole compute blocks up to the last
        token's page (tokens past the length in them are masked, their V times 0)."""
        if self.lengths is None:
            return self.pages_per_seq
        n = -(-self.lengths[b] // self.page_size)
        if n == 0:
            return 0
        start = (n - 1) // self.pages_per_partition * self.pages_per_partition
        return start + -(-(n - start) // self.compute_pages) * self.compute_pages

    def static_key(self) -> tuple[Any, ...]:
        """All fields but seed, shuffle and the length values (only their presence)."""
        return tuple(
            (f.name, getattr(self, f.name))
            for f in dataclasses.fields(self)
            if f.name not in ("seed", "shuffle", "lengths", "logit_scale")
        ) + (("lengths", self.lengths is not None),)

    def shape_summary(self) -> str:
        return self.paged_shape()

    def block_tables(self, rng: np.random.Generator) -> np.ndarray:
        """int32 [batch, pages_per_seq]: distinct pages, except shared prefix pages."""
        return self.page_table(rng, lambda b, j: b > 0 and j < self.shared_pages, 0)

    def materialize(self) -> dict[str, np.ndarray]:
        """q (pre-scaled by 1/sqrt(head_dim)), pages, block tables, lengths, scales.

        Listed slots past a row's length that the kernel reads hold K = 0 and
        V = +-MASKED_V; pages never read (listed after that, or spare) hold NaN
        (NaN scales when quantized).
        """
        rng = self.rng()
        shape = (self.kv_heads, self.total_pages, self.page_size, self.head_dim)
        q = rng.standard_normal((self.batch, self.q_heads, self.head_dim))
        q = q * (self.logit_scale * self.head_dim**-0.5)
        tables = self.block_tables(rng)
        if self.quantized:
            k = rng.integers(-127, 128, shape).astype(np.float64)
            v = rng.integers(-127, 128, shape).astype(np.float64)
            ks = rng.uniform(0.5, 1.5, shape[:3]) / 64
            vs = rng.uniform(0.5, 1.5, shape[:3]) / 64
        else:
            k, v = rng.standard_normal(shape), rng.standard_normal(shape)
            ks = vs = None
        read, visible = slot_masks(tables, self.total_pages, self.page_size,
                                   [self.length(b) for b in range(self.batch)],
                                   [self.read_pages(b) for b in range(self.batch)])
        sign = np.where(rng.random(shape) < 0.5, -1.0, 1.0)
        if self.quantized:
            masked = read & ~visible
            k[:, masked] = 0.0
            v[:, masked] = 127 * sign[:, masked]
            vs[:, masked] = MASKED_V_SCALE
            ks[:, ~read] = np.nan
            vs[:, ~read] = np.nan
        else:
            poison_float(k, v, read, visible, sign)
        arrays = {"q": cast(q, self.dtype), "block_tables": tables}
        if self.quantized:
            arrays.update(
                k_pages=k.astype(np.int8), v_pages=v.astype(np.int8),
                k_scales_pages=ks.astype(np.float32), v_scales_pages=vs.astype(np.float32),
            )
        else:
            arrays.update(k_pages=cast(k, self.dtype), v_pages=cast(v, self.dtype))
        if self.lengths is not None:
            arrays["lengths"] = np.asarray(self.lengths, np.int32)
        return arrays


@st.composite
def paged_cases(
    draw: st.DrawFn,
    *,
    dtypes: tuple[str, ...] = DTYPES,
    max_batch: int = 3,
    groups: tuple[int, ...] = (1, 4, 16, 3, 20),
    kv_head_counts: tuple[int, ...] = (1, 2),
    page_sizes: tuple[int, ...] = (16, 8, 4, 32),
    head_dims: tuple[int, ...] = (32, 64, 16),
    max_tokens: int = 256,
) -> PagedCase:
    """Valid :class:`PagedCase` s.

    Draws page sizes 4-32 with compute blocks of 1-8 pages (at least 16 keys), 1-4
    kv splits, MHA/GQA/MQA heads (groups over and under ``block_h``), lengths on and
    next to page/compute-block/partition edges (zero and full included) or no lengths,
    shared prefix pages, spare pages, shuffled tables, soft caps and int8 pages.
    Shrinks towards float32, batch 1, one head, 16-token pages, one split, no lengths.
    """
    batch = draw(st.integers(1, max_batch))
    kv_heads = draw(st.sampled_from(kv_head_counts))
    page_size = draw(st.sampled_from(page_sizes))
    min_pages = max(1, 16 // page_size)
    per_part = draw(st.sampled_from([p for p in (1, 2, 4, 8) if p >= min_pages]))
    splits = [s for s in (1, 2, 4) if s * per_part * page_size <= max_tokens]
    k_splits = draw(st.sampled_from(splits))
    compute = draw(st.sampled_from([p for p in (1, 2, 4, 8) if p >= min_pages]))
    pages_per_seq = k_splits * per_part
    capacity = pages_per_seq * page_size
    block = min(compute, per_part) * page_size
    lengths = draw(st.one_of(st.none(), edge_lengths(batch, capacity, page_size, block)))
    if lengths is not None and batch > 1 and draw(st.integers(0, 3)) == 3:
        # An empty row next to rows with tokens (30 ci draws reached none without this).
        lengths = (0, *lengths[1:])
    if lengths is not None and not any(lengths):
        # Every row empty leaves no output inside the contract (nothing to compare): the
        # last row gets tokens, ending mid-page. No draw depends on it (see ``full``).
        lengths = (*lengths[:-1], capacity - 1)
    full = min(n // page_size for n in lengths) if lengths is not None else pages_per_seq
    shared = draw(st.integers(0, full)) if batch > 1 and full else 0
    dtype = draw(st.sampled_from(dtypes))
    return PagedCase(
        dtype=dtype,
        **draw_geometry(draw, batch=batch, kv_heads=kv_heads, groups=groups,
                        head_dims=head_dims, page_size=page_size, pages_per_seq=pages_per_seq),
        lengths=lengths,
        shared_pages=shared,
        spare_pages=draw(st.integers(0, 2)),
        shuffle=draw(st.booleans()),
        soft_cap=draw(st.sampled_from((None, None, 2.0, 0.5))),
        logit_scale=draw(st.sampled_from(logit_scales_for(dtype))),
        quantized=draw(st.booleans()),
        block_h=draw(st.sampled_from((16, 32))),
        pages_per_compute_block=compute,
        k_splits=k_splits,
        num_warps=draw(st.sampled_from((8, 4))),
        num_stages=draw(st.sampled_from((2, 1, 3))),
    )
