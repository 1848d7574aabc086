"""The kv-cache write op's case vocabulary, poisoned cache, strategy and events.

A case is a batch of sequences, each with ``cache_lens[i]`` tokens already cached and
``new_lens[i]`` new ones to append, over a paged cache whose pages the (shuffled) page
table hands out; the cache holds distinctive old values everywhere, so a slot written
that must not be, or left that must be written, shows. A family's case adds how its
kernel is told where to write (its operands).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import ml_dtypes
import numpy as np
from hypothesis import strategies as st

from kernel_harness.core.case import Case, cast, check_sizes
from kernel_harness.core.tolerance import ToleranceTable
from kernel_harness.ops.kv_cache_write.reference import kv_cache_write
from kernel_harness.ops.paged_attention.sequences import shuffled_page_table

#: The cache dtypes the op takes: 16-bit, so every element's bits compare exactly as an
#: integer (:func:`~kernel_harness.ops.kv_cache_write.reference.cache_bits`).
KV_WRITE_DTYPES: tuple[str, ...] = ("bfloat16", "float16")

#: Old cache values: magnitudes in [64, 1024), far from the new tokens' N(0, 1).
POISON_RANGE = (64.0, 1024.0)


_COPY = ("a copy: the new tokens' K/V bit for bit, every other element as it was; the "
         "judge's bound cannot be 0, and 1e-7 of the cache's scale (old values up to "
         "1024) is under one rounding step of any new value above 0.013 (bfloat16) or 0.1 "
         "(float16); kv_cache_bits sees the rest")
_BITS = ("exact: each element's 16-bit pattern as an integer (at most 65535), so any "
         "changed bit differs by >= 1, above 1e-7 x 65535 = 0.0066 (a -0.0 written as 0.0, "
         "a flushed subnormal, a stale or misplaced element all fail)")
#: The op's judge: a copy, exact (values and bits), whatever the kernel.
TOLERANCES = ToleranceTable.of_limits({
    (dtype, out): (1e-7, why) for dtype in KV_WRITE_DTYPES
    for out, why in (("kv_cache", _COPY), ("kv_cache_bits", _BITS))})


@dataclasses.dataclass(frozen=True, kw_only=True)
class KvWriteCase(Case):
    """One write of new tokens into a paged cache.

    Attributes:
      cache_lens: per sequence, the tokens already in the cache (positions 0..len-1).
      new_lens: per sequence, the new tokens appended (0: the sequence writes nothing);
        sequence i's are rows sum(new_lens[:i]) .. of k and v.
      page_size, pages_per_seq: tokens per page, page-table width per sequence.
      kv_heads, head_dim: K and V are [rows, kv_heads, head_dim]; a cache token holds
        2 * kv_heads rows (K of head h in row 2h, its V in 2h + 1).
      spare_pages: pages no sequence's table row names (must stay untouched).
      pad_rows: junk rows of k and v past the new tokens (must never be written).
    """

    cache_lens: tuple[int, ...]
    new_lens: tuple[int, ...]
    page_size: int
    pages_per_seq: int
    kv_heads: int
    head_dim: int
    spare_pages: int = 0
    pad_rows: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.dtype not in KV_WRITE_DTYPES:
            raise ValueError(f"dtype must be one of {KV_WRITE_DTYPES} (the cache is compared "
                             f"bit for bit as 16-bit integers), got {self.dtype!r}")
        check_sizes(self, "page_size", "pages_per_seq", "kv_heads", "head_dim")
        if not self.cache_lens or len(self.cache_lens) != len(self.new_lens):
            raise ValueError("cache_lens and new_lens need one entry per sequence, and at "
                             "least one sequence")
        for name in ("cache_lens", "new_lens"):
            if any(not isinstance(n, int) or n < 0 for n in getattr(self, name)):
                raise ValueError(f"{name} must be ints >= 0, got {getattr(self, name)}")
        for name in ("spare_pages", "pad_rows"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        capacity = self.page_size * self.pages_per_seq
        over = [i for i, n in enumerate(self.kv_lens) if n > capacity]
        if over:
            raise ValueError(f"cache_lens + new_lens of sequence(s) {over} exceed a table "
                             f"row's capacity {capacity} (pages_per_seq={self.pages_per_seq} "
                             f"pages of page_size={self.page_size})")
        if self.rows < 1:
            raise ValueError("k and v need at least one row (a new token or a pad row)")

    @property
    def num_seqs(self) -> int:
        """The sequences of the call."""
        return len(self.cache_lens)

    @property
    def kv_lens(self) -> tuple[int, ...]:
        """Per sequence, its tokens after the write."""
        return tuple(c + n for c, n in zip(self.cache_lens, self.new_lens, strict=True))

    @property
    def new_tokens(self) -> int:
        """Rows of k and v that are new tokens."""
        return sum(self.new_lens)

    @property
    def rows(self) -> int:
        """Rows of k and v (new tokens, then pad rows)."""
        return self.new_tokens + self.pad_rows

    @property
    def total_pages(self) -> int:
        """Pages of the cache: every table row's, then the spare ones."""
        return self.num_seqs * self.pages_per_seq + self.spare_pages

    def page_table(self) -> np.ndarray:
        """int32 [num_seqs, pages_per_seq]: distinct pages, shuffled
        (:func:`~kernel_harness.ops.paged_attention.sequences.shuffled_page_table`)."""
        return shuffled_page_table(self.num_seqs, self.pages_per_seq, self.total_pages,
                                   self.rng(1))

    def cu_new_lens(self) -> np.ndarray:
        """int32 [num_seqs + 1]: 0 and the cumulative new_lens."""
        return np.concatenate([[0], np.cumsum(self.new_lens)]).astype(np.int32)

    def materialize(self) -> dict[str, np.ndarray]:
        """k, v [rows, kv_heads, head_dim] ~ N(0, 1) with signed zeros and subnormals
        sprinkled in; the old cache [total_pages, page_size, 2 * kv_heads, head_dim] poisoned
        (magnitudes in :data:`POISON_RANGE`, signed zeros, subnormals); the page table and
        the lengths as int32."""
        rng = self.rng()
        shape = (self.rows, self.kv_heads, self.head_dim)
        k, v = (_sprinkled(rng, rng.standard_normal(shape), self.dtype) for _ in range(2))
        cache_shape = (self.total_pages, self.page_size, 2 * self.kv_heads, self.head_dim)
        magnitude = rng.uniform(*POISON_RANGE, cache_shape)
        old = _sprinkled(rng, magnitude * rng.choice((-1.0, 1.0), cache_shape), self.dtype)
        return {"k": k, "v": v, "kv_cache": old, "block_table": self.page_table(),
                "cache_lens": np.asarray(self.cache_lens, np.int32),
                "new_lens": np.asarray(self.new_lens, np.int32),
                "cu_new_lens": self.cu_new_lens()}


def _sprinkled(rng: np.random.Generator, x: np.ndarray, dtype: str) -> np.ndarray:
    """``x`` in ``dtype`` with ~2% of its elements replaced by -0.0, +0.0 and the
    smallest subnormals of either sign (bit patterns a copy through float arithmetic
    may change)."""
    tiny = float(ml_dtypes.finfo(cast(np.zeros(1), dtype).dtype).smallest_subnormal)
    specials = np.array([-0.0, 0.0, tiny, -tiny, 3 * tiny])
    where = rng.random(x.shape) < 0.02
    x = np.where(where, specials[rng.integers(0, len(specials), x.shape)], x)
    return cast(x, dtype)


def reference(case: KvWriteCase, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The op's reference (:func:`~kernel_harness.ops.kv_cache_write.reference.
    kv_cache_write`) on the case's inputs."""
    return kv_cache_write(inputs["kv_cache"], inputs["k"], inputs["v"],
                          np.asarray(inputs["block_table"]), case.cache_lens, case.new_lens,
                          case.page_size)


@st.composite
def sequence_lengths(draw: st.DrawFn, *, page_size: int, capacity: int
                     ) -> tuple[int, int]:
    """(cache_len, new_len) of one sequence: its end on, before or after a page edge or
    anywhere, and its new tokens one, just enough to cross the page edge below the end, a
    page, all, any, exactly the end's page part (a write that starts at a page start), or
    none (last: a call writing nothing is drawn, not favoured). Shrinks towards one new
    token at position 0."""
    edges = [e + d for e in range(page_size, capacity + 1, page_size) for d in (-1, 0, 1)]
    end = draw(st.one_of(st.integers(1, capacity),
                         st.sampled_from([e for e in edges if 0 <= e <= capacity])))
    in_page = end % page_size
    new = draw(st.sampled_from((1, in_page + 1, page_size, end, -1, in_page, 0)))
    if new < 0:
        new = draw(st.integers(0, end))
    new = min(new, end)
    return end - new, new


@st.composite
def kv_write_fields(draw: st.DrawFn, *, dtypes: tuple[str, ...] = ("bfloat16",),
                    page_sizes: tuple[int, ...] = (8, 16), kv_heads: tuple[int, ...] = (1, 2),
                    head_dims: tuple[int, ...] = (128,), max_seqs: int = 4,
                    max_pages_per_seq: int = 4) -> dict[str, Any]:
    """The :class:`KvWriteCase` fields: 1-``max_seqs`` sequences
    (:func:`sequence_lengths`), 1-``max_pages_per_seq`` pages each, 0-2 spare pages,
    0-3 pad rows."""
    page_size = draw(st.sampled_from(page_sizes))
    pages_per_seq = draw(st.integers(1, max_pages_per_seq))
    lens = draw(st.lists(sequence_lengths(page_size=page_size,
                                          capacity=page_size * pages_per_seq),
                         min_size=1, max_size=max_seqs))
    pad_rows = draw(st.integers(0, 3))
    if not sum(n for _, n in lens):
        pad_rows = max(pad_rows, 1)
    return dict(dtype=draw(st.sampled_from(dtypes)), seed=draw(st.integers(0, 2**16)),
                cache_lens=tuple(c for c, _ in lens), new_lens=tuple(n for _, n in lens),
                page_size=page_size, pages_per_seq=pages_per_seq,
                kv_heads=draw(st.sampled_from(kv_heads)),
                head_dim=draw(st.sampled_from(head_dims)),
                spare_pages=draw(st.integers(0, 2)), pad_rows=pad_rows)


def kv_write_events(case: KvWriteCase) -> list[str]:
    """What a case reaches: page edges crossed, met or started at, sequences writing
    nothing or starting empty, whole pages written, padding, several sequences."""
    s = case.page_size
    ev = [case.dtype]
    for c, n in zip(case.cache_lens, case.new_lens, strict=True):
        if n == 0:
            ev.append("zero-new-tokens")
            continue
        end = c + n
        if c // s != (end - 1) // s:
            ev.append("write-crosses-page")
        if end % s == 0:
            ev.append("ends-at-page-end")
        if c % s == 0:
            ev.append("starts-at-page-start")
        if c == 0:
            ev.append("empty-prefix")
        if n == 1:
            ev.append("decode-step")
        if (end // s) - (-(-c // s)) >= 1:
            ev.append("fills-whole-page")
    if case.num_seqs > 1:
        ev.append("multi-seq")
    if case.pad_rows:
        ev.append("pad-rows")
    if case.spare_pages:
        ev.append("spare-pages")
    if case.new_tokens == 0:
        ev.append("nothing-written")
    return sorted(set(ev))
