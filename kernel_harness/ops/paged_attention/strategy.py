"""The paged-decode case vocabulary and the base strategy pieces every paged family draws
with.

Vocabulary (one spelling across the families): ``batch`` rows, ``q_heads`` query heads
reading ``kv_heads`` K/V heads (query head h reads kv head ``h // group``, ``group =
q_heads // kv_heads``), pages of ``page_size`` tokens, ``pages_per_seq`` page-table
entries per row, ``lengths`` tokens per row, ``pages_per_compute_block`` pages one
kernel block loads; ``shared_pages`` leading entries one physical page shared by rows,
``spare_pages`` physical pages no table names, ``shuffle`` pages in random physical order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
from hypothesis import strategies as st

from kernel_harness.core.case import check_heads

#: V value of slots a kernel reads but must mask (finite: it multiplies them by 0).
MASKED_V = 1e3

#: The op's output: one query token per row, ``out`` [batch, q_heads, head_dim].
OUTPUT_AXES: dict[str, tuple[str, ...]] = {"out": ("batch", "head", "dim")}

#: What a kernel of the whole op supports: decode rows over page tables, ragged lengths,
#: MHA/GQA/MQA heads, a soft cap, no mask besides the lengths.
PAGED_CAPABILITIES: frozenset[str] = frozenset(
    {"decode", "paged", "gqa", "mqa", "ragged-lengths", "soft-cap", "full"})


def head_grouping(q_heads: int, kv_heads: int) -> str:
    """``mqa`` (one kv head), ``gqa`` (groups) or ``mha-heads`` (one q head per kv head)."""
    group = q_heads // kv_heads
    if kv_heads == 1 and group > 1:
        return "mqa"
    return "gqa" if group > 1 else "mha-heads"


def near_edges(edges: set[int] | tuple[int, ...], capacity: int) -> list[int]:
    """Every value on or next to an edge, inside [0, capacity]."""
    return sorted({e + d for e in edges for d in (-1, 0, 1) if 0 <= e + d <= capacity})


@st.composite
def edge_lengths(draw: st.DrawFn, batch: int, capacity: int, *blocks: int
                 ) -> tuple[int, ...]:
    """``batch`` lengths in [0, capacity], each on or next to a multiple of one of
    ``blocks`` (page, compute block, partition: 0 and full included) or anywhere."""
    edges = {e for b in blocks for e in range(0, capacity + 1, b)}
    value = st.one_of(st.sampled_from(near_edges(edges, capacity)), st.integers(0, capacity))
    return tuple(draw(value) for _ in range(batch))


def draw_geometry(draw: st.DrawFn, *, batch: int, kv_heads: int, groups: tuple[int, ...],
                  head_dims: tuple[int, ...], page_size: int, pages_per_seq: int
                  ) -> dict[str, int]:
    """A case's seed and vocabulary fields, drawing (in this order) the seed, the query
    heads (a group of ``groups`` times ``kv_heads``) and the head dim; the rest as given."""
    return dict(seed=draw(st.integers(0, 2**31 - 1)), batch=batch,
                q_heads=draw(st.sampled_from(groups)) * kv_heads, kv_heads=kv_heads,
                head_dim=draw(st.sampled_from(head_dims)), page_size=page_size,
                pages_per_seq=pages_per_seq)


def slot_masks(table: np.ndarray, total_pages: int, page_size: int,
               lengths: tuple[int, ...], read_entries: list[int]
               ) -> tuple[np.ndarray, np.ndarray]:
    """bool [total_pages, page_size] twice: slots the kernel loads (the first
    ``read_entries[b]`` table entries of row b), slots some row sees (t < length)."""
    read = np.zeros((total_pages, page_size), bool)
    visible = np.zeros_like(read)
    pages_per_seq = table.shape[1]
    for b, length in enumerate(lengths):
        for j in range(read_entries[b]):
            read[table[b, j]] = True
        tokens = np.arange(pages_per_seq * page_size) < length
        visible[table[b]] |= tokens.reshape(pages_per_seq, page_size)
    return read, visible


def poison_float(k: np.ndarray, v: np.ndarray, read: np.ndarray, visible: np.ndarray,
                 sign: np.ndarray) -> None:
    """In place, on float pages [kv_heads, total_pages, page_size, dim]: loaded slots no
    row sees get K = 0 and V = +-MASKED_V (a leak shows as a large error), slots never
    loaded NaN (a read shows as NaN)."""
    masked = read & ~visible
    k[:, masked] = 0.0
    v[:, masked] = MASKED_V * sign[:, masked]
    k[:, ~read] = np.nan
    v[:, ~read] = np.nan


@dataclasses.dataclass(frozen=True, kw_only=True)
class PagedGeometry:
    """The vocabulary's fields of every paged case and what it derives from them (a base
    of the families' case dataclasses, which add their lengths, sharing and kernel
    settings and count :attr:`total_pages`).

    Attributes:
      batch, q_heads, kv_heads, head_dim: q is [batch, q_heads, head_dim]; pages are
        [kv_heads, total_pages, page_size, head_dim]; q head h reads kv head h // group.
      page_size, pages_per_seq: page geometry; a page-table row lists pages_per_seq pages.
      spare_pages: physical pages no table names (NaN-filled).
      shuffle: physical pages in random order (else in table order).
      soft_cap: the kernel's ``attn_logits_soft_cap`` (``None``: none).
    """

    batch: int
    q_heads: int
    kv_heads: int
    head_dim: int
    page_size: int
    pages_per_seq: int
    spare_pages: int = 1
    shuffle: bool = True
    soft_cap: float | None = None

    @property
    def total_pages(self) -> int:
        """Physical pages in the pool (each family's case counts its own)."""
        raise NotImplementedError

    @property
    def group(self) -> int:
        """Query heads per kv head."""
        return self.q_heads // self.kv_heads

    @property
    def capacity(self) -> int:
        """Tokens a page-table row can hold."""
        return self.pages_per_seq * self.page_size

    def check_paged(self) -> None:
        """The vocabulary's own invariants (heads group evenly, spare pages, soft cap)."""
        check_heads(self)
        if self.spare_pages < 0:
            raise ValueError("spare_pages must be >= 0")
        if self.soft_cap is not None and self.soft_cap <= 0:
            raise ValueError("soft_cap must be positive")

    def paged_shape(self) -> str:
        """``q=(...) pages=(...) table=(...)``: the shapes every paged case shows."""
        return (
            f"q=({self.batch},{self.q_heads},{self.head_dim}) pages=({self.kv_heads},"
            f"{self.total_pages},{self.page_size},{self.head_dim}) table=({self.batch},"
            f"{self.pages_per_seq})"
        )

    def page_table(self, rng: np.random.Generator, shared: Callable[[int, int], bool],
                   first_own: int) -> np.ndarray:
        """int32 [batch, pages_per_seq] over a (shuffled when ``self.shuffle``) order of
        the physical pages: entry j of row b is page ``order[j]`` where ``shared(b, j)``
        (a shared prefix page), else the next unused page from ``order[first_own]`` on."""
        order = rng.permutation(self.total_pages) if self.shuffle else np.arange(self.total_pages)
        table = np.empty((self.batch, self.pages_per_seq), np.int64)
        nxt = first_own
        for b in range(self.batch):
            for j in range(self.pages_per_seq):
                if shared(b, j):
                    table[b, j] = order[j]
                else:
                    table[b, j] = order[nxt]
                    nxt += 1
        return table.astype(np.int32)
