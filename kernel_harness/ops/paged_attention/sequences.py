"""A batch of ragged sequences over a paged KV cache: what every ragged paged attention case
says, whatever its kernel (tpu-ragged-paged; through :class:`~.passes.PassesCase` rpa v3,
its head-dim-64 variant and MLA v2).

:class:`RaggedBatch` holds the active sequences' query and kv lengths, the padded sizes,
the page geometry, window, cap and scale, checks them once, and builds the scalar
operands every such kernel takes: the padded cumulative query lengths, the padded kv
lengths and a shuffled page table (slots past the active sequences hold junk a kernel
must ignore). A family's case adds its heads, dimensions, blocks and cache layout.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from kernel_harness.core.case import Case


def padded_cu_q_lens(q_lens: Sequence[int], max_num_seqs: int, rng: np.random.Generator
                     ) -> np.ndarray:
    """int32 [max_num_seqs + 1]: 0, the cumulative q_lens, then junk that keeps growing
    (a kernel must read cu_q_lens[num_seqs] as the end)."""
    cu = np.concatenate([[0], np.cumsum(q_lens)])
    extra = cu[-1] + np.cumsum(rng.integers(1, 4, max_num_seqs - len(q_lens)))
    return np.concatenate([cu, extra]).astype(np.int32)


def padded_kv_lens(kv_lens: Sequence[int], max_num_seqs: int, capacity: int,
                   rng: np.random.Generator) -> np.ndarray:
    """int32 [max_num_seqs]: kv_lens, then junk lengths up to the table's capacity."""
    junk = rng.integers(1, capacity + 1, max_num_seqs - len(kv_lens))
    return np.concatenate([kv_lens, junk]).astype(np.int32)


def page_slots(table_row: np.ndarray, kv_len: int, page_size: int
               ) -> tuple[np.ndarray, np.ndarray]:
    """(page, slot) of each of a sequence's ``kv_len`` tokens, in order, through its row of
    the page table (exported scripts embed this source)."""
    t = np.arange(kv_len)
    return table_row[t // page_size], t % page_size


def shuffled_page_table(max_num_seqs: int, pages_per_seq: int, total_pages: int,
                        rng: np.random.Generator) -> np.ndarray:
    """int32 [max_num_seqs, pages_per_seq]: a shuffled assignment of distinct pages (every
    entry a valid page, the unused ones too)."""
    perm = rng.permutation(total_pages)
    return perm[: max_num_seqs * pages_per_seq].reshape(
        max_num_seqs, pages_per_seq).astype(np.int32)


@dataclasses.dataclass(frozen=True, kw_only=True)
class RaggedBatch(Case):
    """``num_seqs`` active sequences attending over a paged cache, in one call.

    Attributes:
      q_lens, kv_lens: per active sequence, ``MIN_Q_LEN <= q_len <= kv_len``; its queries
        are its last q_len positions, consecutive rows of q from row 0.
      max_num_seqs, max_tokens: padded sizes (slots and rows past the active ones hold junk).
      page_size, pages_per_seq: tokens per page, page-table width per sequence.
      sliding_window: keys a query sees, counting itself (None: all earlier keys).
      soft_cap: logits become soft_cap * tanh(logits / soft_cap) (None: off).
      sm_scale: the logit scale; logit_scale: the queries' spread (large: large logits).
    """

    q_lens: tuple[int, ...]
    kv_lens: tuple[int, ...]
    max_num_seqs: int
    max_tokens: int
    page_size: int = 8
    pages_per_seq: int = 4
    sliding_window: int | None = None
    soft_cap: float | None = None
    sm_scale: float = 1.0
    logit_scale: float = 1.0

    #: The fewest queries an active sequence may have (0: a sequence may sit out a step).
    MIN_Q_LEN: ClassVar[int] = 1
    #: Lengths and data are operands; everything else selects the program.
    DYNAMIC_FIELDS: ClassVar[frozenset[str]] = frozenset(
        {"seed", "q_lens", "kv_lens", "logit_scale"})

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.q_lens or len(self.q_lens) != len(self.kv_lens):
            raise ValueError("q_lens and kv_lens need one entry per active sequence")
        if any(q < self.MIN_Q_LEN for q in self.q_lens) or self.total_tokens < 1:
            raise ValueError(f"q_lens must be >= {self.MIN_Q_LEN} with at least one query "
                             "token in all")
        if any(kv < q for q, kv in zip(self.q_lens, self.kv_lens, strict=True)):
            raise ValueError("kv_len must be >= q_len for every sequence (the kernels' "
                             "dynamic_validate_inputs: the queries are the sequence's last "
                             "tokens)")
        if max(self.kv_lens) > self.capacity:
            raise ValueError(f"kv_len {max(self.kv_lens)} does not fit pages_per_seq="
                             f"{self.pages_per_seq} pages of {self.page_size}")
        if self.max_num_seqs < self.num_seqs:
            raise ValueError("max_num_seqs must be >= the number of active sequences")
        if self.max_tokens < self.total_tokens:
            raise ValueError(f"max_tokens={self.max_tokens} < sum(q_lens)={self.total_tokens}")
        if self.sliding_window is not None and self.sliding_window < 1:
            raise ValueError("sliding_window must be >= 1 (or None)")
        if self.soft_cap is not None and self.soft_cap <= 0:
            raise ValueError("soft_cap must be > 0 (or None)")

    @property
    def num_seqs(self) -> int:
        return len(self.q_lens)

    @property
    def total_tokens(self) -> int:
        return sum(self.q_lens)

    @property
    def capacity(self) -> int:
        """Tokens one sequence's page-table row can hold."""
        return self.page_size * self.pages_per_seq

    @property
    def total_pages(self) -> int:
        """One table's worth of pages per slot plus a spare no sequence references."""
        return self.max_num_seqs * self.pages_per_seq + 1

    def token_rows(self) -> np.ndarray:
        """bool [max_tokens]: the query rows of the active sequences (rows at or past
        cu_q_lens[num_seqs] are padding, outside every kernel's contract)."""
        return np.arange(self.max_tokens) < self.total_tokens

    def cu_q_lens(self) -> np.ndarray:
        """int32 [max_num_seqs + 1]: :func:`padded_cu_q_lens`."""
        return padded_cu_q_lens(self.q_lens, self.max_num_seqs, self.rng(1))

    def kv_lens_array(self) -> np.ndarray:
        """int32 [max_num_seqs]: :func:`padded_kv_lens`."""
        return padded_kv_lens(self.kv_lens, self.max_num_seqs, self.capacity, self.rng(2))

    def page_table(self) -> np.ndarray:
        """int32 [max_num_seqs, pages_per_seq]: :func:`shuffled_page_table`."""
        return shuffled_page_table(self.max_num_seqs, self.pages_per_seq, self.total_pages,
                                   self.rng(3))

    def sequence_slots(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """(page, slot) of each of sequence i's ``kv_len`` tokens, in order
        (:func:`page_slots`)."""
        return page_slots(self.page_table()[i], self.kv_lens[i], self.page_size)

    def slots_by_sequence(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """:meth:`sequence_slots` of every active sequence, in order (the page table drawn
        once)."""
        table = self.page_table()
        return [page_slots(row, kv_len, self.page_size)
                for row, kv_len in zip(table, self.kv_lens, strict=False)]

    def owned_slots(self) -> np.ndarray:
        """bool [total_pages, page_size]: cache slots holding a token of an active sequence."""
        owned = np.zeros((self.total_pages, self.page_size), bool)
        for pages, slots in self.slots_by_sequence():
            owned[pages, slots] = True
        return owned
