"""Cases of the TPU paged attention (``jax.experimental.pallas.ops.tpu.paged_attention``)
and the strategy drawing them.

A case describes the page layout (page size, pages per sequence, shared prefix pages,
spare pages, shuffling), the lengths and the kernel options; :meth:`TpuPagedCase.materialize`
builds the page pool and the page table and poisons every slot a correct kernel must not use.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np
from hypothesis import strategies as st

from kernel_harness.core.case import Case, cast, check_sizes
from kernel_harness.ops.paged_attention.strategy import (
    MASKED_V,
    PagedGeometry,
    draw_geometry,
    edge_lengths,
    poison_float,
    slot_masks,
)

#: dtypes drawn for q (and for K/V when they are not int8).
TPU_PAGED_DTYPES: tuple[str, ...] = ("float32", "bfloat16")
#: The kernel's megacore modes (``None``: off).
MEGACORE_MODES: tuple[str | None, ...] = (None, "batch", "kv_head")
#: The int8 dequantization divisor of the kernel's quantization_utils (MAX_INT8 = 127.5:
#: ``from_int8`` is ``x * scale / 127.5``).
INT8_DIVISOR = 127.5


@dataclasses.dataclass(frozen=True, kw_only=True)
class TpuPagedCase(PagedGeometry, Case):
    """One paged decode step: one query per batch row (the vocabulary's fields:
    :class:`~kernel_harness.ops.paged_attention.strategy.PagedGeometry`).

    Attributes:
      pages_per_compute_block: pages one kernel block loads (divides pages_per_seq).
      lengths: tokens per row (0 allowed, up to pages_per_seq * page_size).
      shared_pages: the first ``shared_pages`` table entries point to one physical page
        each, shared by every row whose tokens reach into that entry (a shared prefix).
      quantized: int8 K/V pages with float32 per-token scales (``QuantizedTensor``).
      megacore_mode: ``None``, ``"batch"`` (batch even) or ``"kv_head"`` (kv_heads even).
      inline_seq_dim: the kernel's loop over compute blocks inside one grid step (True)
        or a grid axis (False).
    """

    pages_per_compute_block: int
    lengths: tuple[int, ...]
    shared_pages: int = 0
    quantized: bool = False
    megacore_mode: str | None = None
    inline_seq_dim: bool = True

    #: Only the data changes with these: the program is the same.
    DYNAMIC_FIELDS: ClassVar[frozenset[str]] = frozenset({"seed", "shuffle"})

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.dtype not in TPU_PAGED_DTYPES:
            raise ValueError(f"tpu-paged draws {TPU_PAGED_DTYPES} only, got {self.dtype!r}")
        check_sizes(self, "batch", "q_heads", "kv_heads", "head_dim", "page_size",
                    "pages_per_seq", "pages_per_compute_block")
        self.check_paged()
        if self.pages_per_seq % self.pages_per_compute_block:
            raise ValueError("pages_per_compute_block must divide pages_per_seq (kernel raises)")
        if len(self.lengths) != self.batch:
            raise ValueError(f"lengths needs one entry per batch row ({self.batch})")
        if any(not 0 <= n <= self.capacity for n in self.lengths):
            raise ValueError(f"lengths must lie in [0, {self.capacity}]")
        if not 0 <= self.shared_pages <= self.pages_per_seq:
            raise ValueError("shared_pages must lie in [0, pages_per_seq]")
        if self.megacore_mode not in MEGACORE_MODES:
            raise ValueError(f"megacore_mode must be one of {MEGACORE_MODES}")
        if self.megacore_mode == "batch" and self.batch % 2:
            raise ValueError("megacore_mode='batch' needs an even batch (kernel raises)")
        if self.megacore_mode == "kv_head" and self.kv_heads % 2:
            raise ValueError("megacore_mode='kv_head' needs even kv_heads (kernel raises)")

    @property
    def block_tokens(self) -> int:
        """Tokens per compute block."""
        return self.pages_per_compute_block * self.page_size

    def read_entries(self, b: int) -> int:
        """Table entries of row b the kernel loads: whole compute blocks up to the block
        holding the row's last token (none for length 0)."""
        blocks = -(-self.lengths[b] // self.block_tokens)
        return blocks * self.pages_per_compute_block

    def shares(self, b: int, j: int) -> bool:
        """Entry j of row b is the shared prefix page j (the row's tokens reach into it)."""
        return j < self.shared_pages and self.lengths[b] > j * self.page_size

    @property
    def total_pages(self) -> int:
        own = sum(not self.shares(b, j) for b in range(self.batch)
                  for j in range(self.pages_per_seq))
        return self.shared_pages + own + self.spare_pages

    def shape_summary(self) -> str:
        return f"{self.paged_shape()} lengths={list(self.lengths)}"

    def physical_table(self, rng: np.random.Generator) -> np.ndarray:
        """int32 [batch, pages_per_seq]: distinct physical pages, except the shared prefix."""
        return self.page_table(rng, self.shares, self.shared_pages)

    def slot_masks(self, table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """bool [total_pages, page_size] twice: slots the kernel loads, slots some row sees."""
        return slot_masks(table, self.total_pages, self.page_size, self.lengths,
                          [self.read_entries(b) for b in range(self.batch)])

    def materialize(self) -> dict[str, np.ndarray]:
        """q (pre-scaled by 1/sqrt(head_dim)), K/V pages (int8 + scales when quantized),
        lengths and the page table.

        Loaded slots no row sees hold K = 0 and V = +-MASKED_V (int8: V = +-127 with a
        scale making it about MASKED_V); pages never loaded hold NaN (NaN scales).
        """
        rng = self.rng()
        shape = (self.kv_heads, self.total_pages, self.page_size, self.head_dim)
        q = rng.standard_normal((self.batch, self.q_heads, self.head_dim)) * self.head_dim**-0.5
        table = self.physical_table(rng)
        read, visible = self.slot_masks(table)
        masked = read & ~visible
        sign = np.where(rng.random(shape) < 0.5, -1.0, 1.0)
        arrays: dict[str, np.ndarray] = {"q": cast(q, self.dtype)}
        if self.quantized:
            k = rng.integers(-127, 128, shape)
            v = rng.integers(-127, 128, shape)
            ks = rng.uniform(0.5, 2.0, (*shape[:3], 1))
            vs = rng.uniform(0.5, 2.0, (*shape[:3], 1))
            k[:, masked] = 0
            v[:, masked] = (127 * sign[:, masked]).astype(v.dtype)
            vs[:, masked] = MASKED_V * INT8_DIVISOR / 127
            ks[:, ~read] = np.nan
            vs[:, ~read] = np.nan
            arrays.update(k_pages=k.astype(np.int8), v_pages=v.astype(np.int8),
                          k_scales=ks.astype(np.float32), v_scales=vs.astype(np.float32))
        else:
            k, v = rng.standard_normal(shape), rng.standard_normal(shape)
            poison_float(k, v, read, visible, sign)
            arrays.update(k_pages=cast(k, self.dtype), v_pages=cast(v, self.dtype))
        arrays["lengths"] = np.asarray(self.lengths, np.int32)
        arrays["page_indices"] = table
        return arrays

    def static_key(self) -> tuple[Any, ...]:
        """Every field but seed and shuffle; lengths only through total_pages (a shape)."""
        return tuple(
            (f.name, getattr(self, f.name)) for f in dataclasses.fields(self)
            if f.name not in self.DYNAMIC_FIELDS | {"lengths"}
        ) + (("total_pages", self.total_pages),)


@st.composite
def tpu_paged_cases(
    draw: st.DrawFn,
    *,
    dtypes: tuple[str, ...] = TPU_PAGED_DTYPES,
    max_batch: int = 4,
    groups: tuple[int, ...] = (1, 8, 2, 4, 3),
    kv_head_counts: tuple[int, ...] = (2, 1, 4),
    page_sizes: tuple[int, ...] = (16, 8, 32),
    head_dims: tuple[int, ...] = (128, 256),
    quantized: tuple[bool, ...] = (False, True),
    megacore: tuple[str | None, ...] = MEGACORE_MODES,
) -> TpuPagedCase:
    """Valid :class:`TpuPagedCase` s.

    Draws 1-4 rows with lengths on and next to page and compute-block edges (0 and full
    included, zero-length rows anywhere in the batch), page sizes 8-32, 1-4 pages per
    compute block and 1-3 blocks per sequence, 1, 2 or 4 kv heads, MHA/GQA/MQA heads
    (groups of 8, where the kernel keeps q and its running output in q's dtype, and
    groups that are not), shared prefix pages, spare pages, shuffled tables, soft caps,
    int8 K/V, the three megacore modes (kv_head only with 4 kv heads) and both
    inline_seq_dim settings. Shrinks towards float32, one row, 2 kv heads, MHA, no
    megacore, the inline loop.
    """
    batch = draw(st.integers(1, max_batch))
    kv_heads = draw(st.sampled_from(kv_head_counts))
    page_size = draw(st.sampled_from(page_sizes))
    ppcb = draw(st.sampled_from((1, 2, 4)))
    pages_per_seq = ppcb * draw(st.integers(1, max(1, 3 if ppcb < 4 else 2)))
    capacity = pages_per_seq * page_size
    lengths = draw(edge_lengths(batch, capacity, page_size, ppcb * page_size))
    if batch == 4 and draw(st.integers(0, 2)) == 2:
        # A run of empty rows between two rows with tokens: the kernel's prefetch chain
        # must skip every empty row (a single empty row does not reach that loop).
        lengths = (max(lengths[0], 1), 0, 0, max(lengths[3], 1))
    # Megacore cases run with two simulated cores (several times slower): one in three.
    # kv_head mode is drawn only with >= 4 kv heads, where each core takes several heads
    # and a head-stride bug shows (with 2, each core takes one head at offset 0 or 1).
    modes = [m for m in megacore if (m == "batch" and batch % 2 == 0)
             or (m == "kv_head" and kv_heads >= 4)]
    mode = draw(st.sampled_from(modes)) if modes and draw(st.integers(0, 2)) == 2 else None
    # Drawn in this order (as the fields are listed) so that a derandomized stream stays
    # the same where the fix-up of lengths below does not apply.
    fields = dict(
        dtype=draw(st.sampled_from(dtypes)),
        **draw_geometry(draw, batch=batch, kv_heads=kv_heads, groups=groups,
                        head_dims=head_dims, page_size=page_size, pages_per_seq=pages_per_seq),
        pages_per_compute_block=ppcb,
        lengths=lengths,
        shared_pages=draw(st.integers(0, pages_per_seq)) if batch > 1 else 0,
        spare_pages=draw(st.integers(0, 2)),
        shuffle=draw(st.booleans()),
        soft_cap=draw(st.sampled_from((None, None, 1.0, 5.0))),
        quantized=draw(st.sampled_from(quantized)),
        megacore_mode=mode,
        inline_seq_dim=not draw(st.booleans()),  # shrinks towards the inline loop
    )
    if not fields["inline_seq_dim"] and not any(lengths):
        # Outside the inline loop an empty row's output is outside the contract, so a batch
        # of empty rows would compare nothing: the last row gets tokens, ending mid-page.
        fields["lengths"] = (*lengths[:-1], capacity - 1)
    return TpuPagedCase(**fields)
