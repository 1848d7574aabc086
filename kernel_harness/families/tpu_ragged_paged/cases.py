"""Cases of TPU ragged paged attention and the strategy.

A case describes one call: the active sequences (their query and kv lengths, in order),
the padded maximum of sequences and of query tokens, heads, page geometry, the kernel's
block sizes, sliding window, soft cap and scale. The page table, the queries, the paged
K/V cache and the contents of every padding slot come from the seed.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np
from hypothesis import strategies as st

from kernel_harness.core.case import cast, check_heads
from kernel_harness.ops.paged_attention.sequences import RaggedBatch

#: dtypes the harness draws (q and the K/V pages share it; no quantized K/V scales).
RAGGED_DTYPES: tuple[str, ...] = ("float32", "bfloat16")


@dataclasses.dataclass(frozen=True, kw_only=True)
class RaggedCase(RaggedBatch):
    """One ragged paged attention call over ``num_seqs`` active sequences (the sequences,
    padding, pages, window, cap and scale: :class:`~kernel_harness.ops.paged_attention.
    sequences.RaggedBatch`).

    Attributes:
      q_lens: 0 allowed (a sequence with no queries in this step), at least one query in
        all.
      kv_lens: 0 is accepted (the kernel's validator allows it) but never drawn: see the
        family contract (a kv_len 0 sequence corrupts the next one).
      q_heads, kv_heads: query heads, K/V heads (GQA when they differ).
      head_dim: the head dimension.
      kv_pages_per_block, queries_per_block: the kernel's num_kv_pages_per_block and
        num_queries_per_block.
      logit_scale: the queries are drawn with this standard deviation times
        head_dim**-0.25 (large values: large logits).
      poison: cache slots no active sequence owns (token slots past kv_len in a
        sequence's last page, the pages of padding slots, the spare page) hold NaN, as
        stale or uninitialized cache memory may; the kernel must not let them in.
    """

    q_heads: int
    kv_heads: int
    head_dim: int = 128
    kv_pages_per_block: int = 1
    queries_per_block: int = 8
    poison: bool = False

    #: jax's ragged paged attention takes sequences with no queries in a step.
    MIN_Q_LEN: ClassVar[int] = 0
    #: The batch's operands, and which cache slots hold NaN (data too).
    DYNAMIC_FIELDS: ClassVar[frozenset[str]] = RaggedBatch.DYNAMIC_FIELDS | {"poison"}

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.dtype not in RAGGED_DTYPES:
            raise ValueError(f"ragged paged attention cases take {RAGGED_DTYPES}, "
                             f"got {self.dtype!r}")
        check_heads(self)
        if not 1 <= self.kv_pages_per_block <= self.pages_per_seq:
            raise ValueError("kv_pages_per_block must be in [1, pages_per_seq]")
        if self.queries_per_block < 1 or self.head_dim < 1:
            raise ValueError("queries_per_block and head_dim must be >= 1")

    def shape_summary(self) -> str:
        return (f"q=({self.max_tokens},{self.q_heads},{self.head_dim}) "
                f"pages=({self.total_pages},{self.page_size},{2 * self.kv_heads},"
                f"{self.head_dim}) seqs={self.num_seqs}/{self.max_num_seqs}")

    def materialize(self) -> dict[str, np.ndarray]:
        """q (padding rows hold data too), kv_pages (combined heads: K at even, V at odd
        head slots), kv_lens, page_indices, cu_q_lens, num_seqs."""
        rng = self.rng()
        q = rng.standard_normal((self.max_tokens, self.q_heads, self.head_dim))
        q *= self.logit_scale * self.head_dim**-0.25
        kv = rng.standard_normal((self.total_pages, self.page_size, 2 * self.kv_heads,
                                  self.head_dim))
        kv[:, :, 0::2] *= self.head_dim**-0.25
        if self.poison:
            kv[~self.owned_slots()] = np.nan
        return {
            "q": cast(q, self.dtype),
            "kv_pages": cast(kv, self.dtype),
            "kv_lens": self.kv_lens_array(),
            "page_indices": self.page_table(),
            "cu_q_lens": self.cu_q_lens(),
            "num_seqs": np.asarray([self.num_seqs], np.int32),
        }


@st.composite
def _sequence(draw: st.DrawFn, capacity: int, page_size: int) -> tuple[int, int]:
    """(q_len, kv_len): decode (q_len 1) or a prefill chunk; kv_len ending on a page edge,
    one off it, or anywhere."""
    edges = [e + d for e in range(page_size, capacity + 1, page_size) for d in (-1, 0, 1)]
    kv_len = draw(st.one_of(st.integers(1, capacity),
                            st.sampled_from([e for e in edges if 1 <= e <= capacity])))
    kind = draw(st.integers(0, 7))
    if kind < 4:
        return 1, kv_len
    if kind == 7:
        return 0, kv_len  # a sequence with cached keys but no queries this step
    return draw(st.one_of(st.integers(1, kv_len), st.just(kv_len))), kv_len


#: Features an implementation may declare it lacks (``--without``), and what the strategy
#: then stops drawing (the differences real ragged paged kernels have: ejkernel, tokamax).
OPTIONAL: dict[str, str] = {
    "soft-cap": "soft_cap always None",
    "sliding-window": "sliding_window always None",
    "sm-scale": "sm_scale always 1.0",
    "gqa": "kv_heads == q_heads (no grouped- or multi-query attention)",
    "prefill": "every sequence a decode step (q_len 1 or 0)",
    "seq-without-queries": "no sequence with q_len 0",
    "padding": "max_num_seqs == num_seqs and max_tokens == sum(q_lens) (no padding slots "
    "or rows)",
}


def features(case: RaggedCase) -> frozenset[str]:
    """The :data:`OPTIONAL` features ``case`` uses."""
    used = {"soft-cap": case.soft_cap is not None,
            "sliding-window": case.sliding_window is not None,
            "sm-scale": case.sm_scale != 1.0,
            "gqa": case.q_heads != case.kv_heads,
            "prefill": any(q > 1 for q in case.q_lens),
            "seq-without-queries": 0 in case.q_lens,
            "padding": case.max_num_seqs > case.num_seqs or case.max_tokens > case.total_tokens}
    return frozenset(name for name, on in used.items() if on)


def _check_without(without: frozenset[str]) -> None:
    unknown = set(without) - set(OPTIONAL)
    if unknown:
        raise ValueError(f"tpu-ragged-paged has no optional features {sorted(unknown)}; "
                         f"known: {sorted(OPTIONAL)}")


#: The page geometry drawn by default: tokens per page, and the least and most pages of a
#: page-table row (small, so interpret mode stays quick; a library with 128-token pages
#: declares its own: :func:`ragged_cases`).
PAGE_SIZES: tuple[int, ...] = (4, 8)
PAGES_PER_SEQ: tuple[int, int] = (1, 4)
#: Query block sizes drawn by default.
QUERIES_PER_BLOCK: tuple[int, ...] = (8, 2, 4, 16)


def check_geometry(page_sizes: tuple[int, ...], pages_per_seq: tuple[int, int],
                   queries_per_block: tuple[int, ...]) -> None:
    """Raises, saying what is accepted, unless the geometry can be drawn."""
    if not page_sizes or any(not isinstance(p, int) or p < 1 for p in page_sizes):
        raise ValueError(f"page_sizes must be positive token counts, got {page_sizes!r}")
    if (len(pages_per_seq) != 2 or not 1 <= pages_per_seq[0] <= pages_per_seq[1]):
        raise ValueError(f"pages_per_seq must be (least, most) with 1 <= least <= most, got "
                         f"{pages_per_seq!r}")
    if not queries_per_block or any(q < 1 for q in queries_per_block):
        raise ValueError(f"queries_per_block must be positive, got {queries_per_block!r}")


@st.composite
def ragged_cases(draw: st.DrawFn, *, dtypes: tuple[str, ...] = RAGGED_DTYPES,
                 max_seqs: int = 4, without: frozenset[str] = frozenset(),
                 page_sizes: tuple[int, ...] = PAGE_SIZES,
                 pages_per_seq: tuple[int, int] = PAGES_PER_SEQ,
                 queries_per_block: tuple[int, ...] = QUERIES_PER_BLOCK) -> RaggedCase:
    """Valid :class:`RaggedCase` s.

    Draws 1-4 active sequences mixing decode (q_len 1), prefill chunks (q_len up to
    kv_len, kv_len on and off page edges) and sequences with no queries (q_len 0), 0-2
    padding sequence slots and 0-5 padding query rows, MHA/GQA/MQA heads (1-4 kv heads,
    1-4 queries per kv head), pages of ``page_sizes`` tokens (4 or 8), ``pages_per_seq``
    pages per sequence (1-4), kv blocks of 1..pages_per_seq pages and query blocks of
    ``queries_per_block`` rows (2-16: sequences span query blocks and share them), sliding
    windows, soft caps, large logits, NaN in the cache slots no sequence owns,
    float32/bfloat16. ``without`` names :data:`OPTIONAL` features never drawn. A library's
    family declares its own page geometry (``functools.partial(ragged_cases,
    page_sizes=(128,), pages_per_seq=(2, 4))``: multi-page tables of 128-token pages).
    Shrinks towards float32, one decode sequence, no window or cap.
    """
    _check_without(without)
    check_geometry(page_sizes, pages_per_seq, queries_per_block)
    dtype = draw(st.sampled_from(dtypes))
    page_size = draw(st.sampled_from(page_sizes))
    pages_per_seq = draw(st.integers(*pages_per_seq))
    capacity = page_size * pages_per_seq
    n = draw(st.integers(1, max_seqs))
    seqs = [draw(_sequence(capacity, page_size)) for _ in range(n)]
    if "prefill" in without:
        seqs = [(min(q, 1), kv) for q, kv in seqs]
    if "seq-without-queries" in without:
        seqs = [(max(q, 1), kv) for q, kv in seqs]
    if all(q == 0 for q, _ in seqs):
        seqs[0] = (1, seqs[0][1])
    q_lens, kv_lens = (tuple(x) for x in zip(*seqs, strict=True))
    kv_heads = draw(st.sampled_from((1, 2, 4)))
    ratio = 1 if "gqa" in without else draw(st.sampled_from((1, 2, 4)))
    window = draw(st.one_of(st.none(), st.integers(1, capacity)))
    cap = draw(st.sampled_from((None, 2.0, 20.0)))
    padding = "padding" not in without
    return RaggedCase(
        dtype=dtype,
        seed=draw(st.integers(0, 2**31 - 1)),
        q_lens=q_lens,
        kv_lens=kv_lens,
        max_num_seqs=n + (draw(st.integers(0, 2)) if padding else 0),
        max_tokens=sum(q_lens) + (draw(st.integers(0, 5)) if padding else 0),
        q_heads=kv_heads * ratio,
        kv_heads=kv_heads,
        page_size=page_size,
        pages_per_seq=pages_per_seq,
        kv_pages_per_block=draw(st.integers(1, pages_per_seq)),
        queries_per_block=draw(st.sampled_from(queries_per_block)),
        sliding_window=None if "sliding-window" in without else window,
        soft_cap=None if "soft-cap" in without else cap,
        sm_scale=1.0 if "sm-scale" in without else draw(st.sampled_from((0.5, 1.0))),
        logit_scale=draw(st.sampled_from((1.0, 4.0))),
        poison=draw(st.booleans()),
    )


def ragged_seed_cases(without: frozenset[str] = frozenset()) -> tuple[RaggedCase, ...]:
    """The cases every matches-reference run tries first (a short random run can miss
    each of these paths): sequences ending exactly at a query block's end (the prefetch of
    the next sequence), a sequence spanning query blocks, decode and prefill sharing a
    block, several kv blocks with a partial last page, GQA, a window cutting keys, NaN in
    unowned cache slots, padding rows and sequence slots; float32 and bfloat16."""
    _check_without(without)
    cases = (
        RaggedCase(dtype="float32", seed=7, q_lens=(1, 5, 2, 1), kv_lens=(7, 12, 5, 16),
                   max_num_seqs=6, max_tokens=11, q_heads=4, kv_heads=2,
                   page_size=4, pages_per_seq=4, kv_pages_per_block=2, queries_per_block=4,
                   sliding_window=6, sm_scale=0.5, logit_scale=4.0, poison=True),
        RaggedCase(dtype="bfloat16", seed=8, q_lens=(2, 1, 3), kv_lens=(2, 9, 8),
                   max_num_seqs=4, max_tokens=8, q_heads=8, kv_heads=4,
                   page_size=8, pages_per_seq=2, kv_pages_per_block=1, queries_per_block=2,
                   soft_cap=2.0, logit_scale=4.0, poison=True),
    )
    return tuple(c for c in cases if not features(c) & without)
