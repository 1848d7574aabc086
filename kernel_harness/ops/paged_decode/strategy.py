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

import numpy as np
from hypothesis import strategies as st

#: V value of slots a kernel reads but must mask (finite: it multiplies them by 0).
MASKED_V = 1e3


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
