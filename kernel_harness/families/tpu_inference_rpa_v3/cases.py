"""Cases of tpu-inference's ragged paged attention v3 and the strategy.

A case describes one call: the active sequences (query and kv lengths, in order), which of
them the kernel is told are decode-only and prefill-only (its ``distribution``), the padded
maxima, heads, page geometry, the three passes' block sizes (memory and compute), window,
soft cap, scale, and the TPU generation the kernel is told it runs on. The new tokens' K/V,
the old cache, the page table and the junk in padding slots come from the seed.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np
from hypothesis import strategies as st

from kernel_harness.core.case import Case, cast, check_heads

#: dtypes drawn (q, the new K/V and the cache share it; no fp8 cache, no q/k/v scales).
RPA_DTYPES: tuple[str, ...] = ("float32", "bfloat16")

#: TPU generations the kernel is told it runs on (``get_tpu_version``): 5 and 6 share the
#: default block table; 6+ narrows the mask's position arithmetic to int16 for packed
#: (bfloat16) queries; 7 places q/kv/cache in HBM explicitly (another program).
TPU_VERSIONS: tuple[int, ...] = (5, 6, 7)

Blocks = tuple[int, int, int, int]


def _packing(dtype: str) -> int:
    """Elements per 32-bit word (the kernel's ``get_dtype_packing``)."""
    return 1 if dtype == "float32" else 2


def _align(x: int, a: int) -> int:
    return -(-x // a) * a


@dataclasses.dataclass(frozen=True, kw_only=True)
class RpaV3Case(Case):
    """One ``ragged_paged_attention`` (v3) call over ``num_seqs`` active sequences.

    Attributes:
      q_lens, kv_lens: per active sequence, 1 <= q_len <= kv_len; its queries are its last
        q_len positions and their K/V are written into the cache by the call.
      decode_seqs: the first ``decode_seqs`` sequences form the decode pass (q_len 1 each).
      prefill_seqs: the next ones form the prefill pass (q_len == ``chunk_prefill_size``
        each); the rest go to the mixed pass.
      chunk_prefill_size: the prefill pass's static query length (None: no prefill pass).
      max_num_seqs, max_tokens: padded sizes (slots past the active ones hold junk).
      q_heads, kv_heads, head_dim: heads and head dimension (64 is padded to 128 lanes).
      page_size, pages_per_seq: tokens per page, page-table width per sequence.
      d_blocks, p_blocks, m_blocks: (bq_sz, bkv_sz, bq_csz, bkv_csz) of each pass: query
        and kv tokens fetched per block, and the compute blocks within them.
      sliding_window, soft_cap, sm_scale, logit_scale: as in the attention op.
      tpu_version: the TPU generation the kernel is told it runs on.
    """

    q_lens: tuple[int, ...]
    kv_lens: tuple[int, ...]
    decode_seqs: int = 0
    prefill_seqs: int = 0
    chunk_prefill_size: int | None = None
    max_num_seqs: int
    max_tokens: int
    q_heads: int
    kv_heads: int
    head_dim: int = 128
    page_size: int = 8
    pages_per_seq: int = 4
    d_blocks: Blocks = (1, 8, 1, 8)
    p_blocks: Blocks = (8, 16, 8, 8)
    m_blocks: Blocks = (8, 16, 8, 8)
    sliding_window: int | None = None
    soft_cap: float | None = None
    sm_scale: float = 1.0
    logit_scale: float = 1.0
    tpu_version: int = 6

    #: Lengths and data are operands; everything else selects the program.
    DYNAMIC_FIELDS: ClassVar[frozenset[str]] = frozenset(
        {"seed", "q_lens", "kv_lens", "decode_seqs", "prefill_seqs", "logit_scale"})

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.dtype not in RPA_DTYPES:
            raise ValueError(f"rpa v3 cases take {RPA_DTYPES}, got {self.dtype!r}")
        if not self.q_lens or len(self.q_lens) != len(self.kv_lens):
            raise ValueError("q_lens and kv_lens need one entry per active sequence")
        if any(not 1 <= q <= kv for q, kv in zip(self.q_lens, self.kv_lens, strict=True)):
            raise ValueError("every sequence needs 1 <= q_len <= kv_len (the kernel's "
                             "dynamic_validate_inputs)")
        if max(self.kv_lens) > self.page_size * self.pages_per_seq:
            raise ValueError(f"kv_len {max(self.kv_lens)} does not fit pages_per_seq="
                             f"{self.pages_per_seq} pages of {self.page_size}")
        d, p = self.decode_seqs, self.prefill_seqs
        if d < 0 or p < 0 or d + p > self.num_seqs:
            raise ValueError("decode_seqs + prefill_seqs must be within the sequences")
        if any(q != 1 for q in self.q_lens[:d]):
            raise ValueError("the decode pass's sequences must have q_len 1")
        if p and any(q != self.chunk_prefill_size for q in self.q_lens[d:d + p]):
            raise ValueError("the prefill pass's sequences must have q_len == "
                             "chunk_prefill_size")
        if self.max_num_seqs < self.num_seqs or self.max_tokens < sum(self.q_lens):
            raise ValueError("max_num_seqs/max_tokens must hold the active sequences")
        check_heads(self)
        if self.page_size % _packing(self.dtype):
            raise ValueError("page_size must be a multiple of the dtype's packing")
        for name in ("d_blocks", "p_blocks", "m_blocks"):
            bq, bkv, bq_c, bkv_c = getattr(self, name)
            if bq % bq_c or bkv % bkv_c or bkv % self.page_size or bkv_c % self.page_size:
                raise ValueError(f"{name}={getattr(self, name)}: compute blocks must divide "
                                 "the fetched ones, kv blocks be multiples of page_size")
        if self.tpu_version not in TPU_VERSIONS:
            raise ValueError(f"tpu_version must be one of {TPU_VERSIONS}")

    @property
    def num_seqs(self) -> int:
        return len(self.q_lens)

    @property
    def total_tokens(self) -> int:
        return sum(self.q_lens)

    @property
    def total_pages(self) -> int:
        """One table's worth of pages per slot plus a spare no sequence references."""
        return self.max_num_seqs * self.pages_per_seq + 1

    def cache_shape(self) -> tuple[int, ...]:
        """[pages, page_size, combined heads / packing, packing, head_dim padded to 128]."""
        pack = _packing(self.dtype)
        return (self.total_pages, self.page_size, _align(2 * self.kv_heads, pack) // pack,
                pack, _align(self.head_dim, 128))

    def distribution(self) -> np.ndarray:
        """int32 [3]: ends of the decode, prefill and mixed passes' sequences."""
        d, p = self.decode_seqs, self.prefill_seqs
        return np.asarray([d, d + p, self.num_seqs], np.int32)

    def cu_q_lens(self) -> np.ndarray:
        """int32 [max_num_seqs + 1]: 0, cumulative q_lens, then growing junk."""
        cu = np.concatenate([[0], np.cumsum(self.q_lens)])
        extra = cu[-1] + np.cumsum(self.rng(1).integers(1, 4, self.max_num_seqs - self.num_seqs))
        return np.concatenate([cu, extra]).astype(np.int32)

    def kv_lens_array(self) -> np.ndarray:
        """int32 [max_num_seqs]: kv_lens, then junk lengths up to the table's capacity."""
        junk = self.rng(2).integers(1, self.page_size * self.pages_per_seq + 1,
                                    self.max_num_seqs - self.num_seqs)
        return np.concatenate([self.kv_lens, junk]).astype(np.int32)

    def page_table(self) -> np.ndarray:
        """int32 [max_num_seqs, pages_per_seq]: a shuffled assignment of distinct pages."""
        perm = self.rng(3).permutation(self.total_pages)
        return perm[: self.max_num_seqs * self.pages_per_seq].reshape(
            self.max_num_seqs, self.pages_per_seq).astype(np.int32)

    def static_key(self) -> tuple[Any, ...]:
        return tuple((f.name, getattr(self, f.name)) for f in dataclasses.fields(self)
                     if f.name not in self.DYNAMIC_FIELDS)

    def shape_summary(self) -> str:
        return (f"q=({self.max_tokens},{self.q_heads},{self.head_dim}) cache={self.cache_shape()}"
                f" seqs={self.num_seqs}/{self.max_num_seqs} tpu_v{self.tpu_version}")

    def materialize(self) -> dict[str, np.ndarray]:
        """q, the new tokens' k and v [max_tokens, heads, head_dim] (padding rows too), the
        old cache (every real lane drawn, lanes past head_dim zero as the kernel writes
        them), kv_lens, page_indices (flat), cu_q_lens, distribution."""
        rng = self.rng()
        t, d = self.max_tokens, self.head_dim
        q = rng.standard_normal((t, self.q_heads, d)) * self.logit_scale * d**-0.25
        k = rng.standard_normal((t, self.kv_heads, d)) * d**-0.25
        v = rng.standard_normal((t, self.kv_heads, d))
        cache = np.zeros(self.cache_shape())
        pages, size, _, _, lanes = cache.shape
        heads = rng.standard_normal((pages, size, 2 * self.kv_heads, d))
        heads[:, :, 0::2] *= d**-0.25
        cache_heads = cache.reshape(pages, size, -1, lanes)
        cache_heads[:, :, : 2 * self.kv_heads, :d] = heads
        return {
            "q": cast(q, self.dtype), "k": cast(k, self.dtype), "v": cast(v, self.dtype),
            "kv_cache": cast(cache_heads.reshape(cache.shape), self.dtype),
            "kv_lens": self.kv_lens_array(), "page_indices": self.page_table().reshape(-1),
            "cu_q_lens": self.cu_q_lens(), "distribution": self.distribution(),
        }


def updated_cache(case: RpaV3Case, inputs: dict[str, np.ndarray]) -> np.ndarray:
    """The cache after the call, by the contract: token ``kv_len - q_len + j`` of sequence
    i (page ``table[i, pos // page_size]``, slot ``pos % page_size``) holds the i-th
    sequence's j-th new K in combined head 2h and V in 2h+1; nothing else changes."""
    cache = np.array(inputs["kv_cache"])
    flat = cache.reshape(*cache.shape[:2], -1, cache.shape[-1])  # combined heads
    table = case.page_table()
    start = 0
    for i, (q_len, kv_len) in enumerate(zip(case.q_lens, case.kv_lens, strict=True)):
        for j in range(q_len):
            pos = kv_len - q_len + j
            page, slot = table[i, pos // case.page_size], pos % case.page_size
            flat[page, slot, 0: 2 * case.kv_heads: 2, : case.head_dim] = inputs["k"][start + j]
            flat[page, slot, 1: 2 * case.kv_heads: 2, : case.head_dim] = inputs["v"][start + j]
        start += q_len
    return flat.reshape(cache.shape)


def sequence_kv(case: RpaV3Case, cache: np.ndarray, i: int) -> tuple[np.ndarray, np.ndarray]:
    """float32 K and V [kv_len, kv_heads, head_dim] of sequence i read from ``cache``."""
    flat = cache.reshape(*cache.shape[:2], -1, cache.shape[-1]).astype(np.float32)
    t = np.arange(case.kv_lens[i])
    tokens = flat[case.page_table()[i, t // case.page_size], t % case.page_size]
    return (tokens[:, 0: 2 * case.kv_heads: 2, : case.head_dim],
            tokens[:, 1: 2 * case.kv_heads: 2, : case.head_dim])


@st.composite
def _blocks(draw: st.DrawFn, page_size: int, *, decode: bool) -> Blocks:
    """(bq_sz, bkv_sz, bq_csz, bkv_csz): kv blocks of 1, 2 or 4 pages with compute blocks
    of a page or more (often smaller than the fetched block); query blocks of 1 (decode)
    or 2-16 tokens with compute blocks dividing them."""
    bkv = page_size * draw(st.sampled_from((1, 2, 4)))
    bkv_c = draw(st.sampled_from([c for c in (page_size, 2 * page_size, bkv) if bkv % c == 0]))
    bq = 1 if decode else draw(st.sampled_from((8, 2, 4, 16)))
    bq_c = draw(st.sampled_from([c for c in (bq, bq // 2, 1) if c >= 1 and bq % c == 0]))
    return (bq, bkv, bq_c, bkv_c)


@st.composite
def rpa_v3_cases(draw: st.DrawFn, *, dtypes: tuple[str, ...] = RPA_DTYPES,
                 max_seqs: int = 4, without: frozenset[str] = frozenset()) -> RpaV3Case:
    """Valid :class:`RpaV3Case` s: 1-4 sequences ordered as the kernel's passes take
    them (decode steps, then prefill chunks of one static length, then a mix of both),
    kv_len on, before and after page edges, 0-2 padding sequence slots and 0-5 padding
    rows, MHA/GQA/MQA, head_dim 128 or 64, pages of 8 or 16 tokens, drawn memory and
    compute blocks per pass, windows, soft caps, large logits, TPU v5/v6/v7, float32 and
    bfloat16. Shrinks towards one float32 sequence in the mixed pass, on v5."""
    del without  # nothing optional yet
    dtype = draw(st.sampled_from(dtypes))
    page_size = draw(st.sampled_from((8, 16)))
    pages_per_seq = draw(st.integers(1, 4))
    capacity = page_size * pages_per_seq

    def kv_len(at_least: int) -> int:
        edges = [e + d for e in range(page_size, capacity + 1, page_size) for d in (-1, 0, 1)]
        return draw(st.one_of(st.integers(at_least, capacity),
                              st.sampled_from([e for e in edges if at_least <= e <= capacity]
                                              or [capacity])))

    decode = draw(st.integers(0, max_seqs))
    chunk = draw(st.sampled_from((None, 2, 5, 8)))
    prefill = 0 if chunk is None else draw(st.integers(0, max_seqs - decode))
    mixed = draw(st.integers(0 if decode + prefill else 1, max_seqs - decode - prefill))
    seqs = [(1, kv_len(1)) for _ in range(decode)]
    seqs += [(chunk, kv_len(chunk)) for _ in range(prefill)]
    for _ in range(mixed):
        kv = kv_len(1)
        seqs.append((draw(st.sampled_from((1, kv, max(1, kv // 2)))), kv))
    q_lens, kv_lens = (tuple(x) for x in zip(*seqs, strict=True))
    kv_heads = draw(st.sampled_from((1, 2, 4)))
    return RpaV3Case(
        dtype=dtype, seed=draw(st.integers(0, 2**31 - 1)),
        q_lens=q_lens, kv_lens=kv_lens, decode_seqs=decode, prefill_seqs=prefill,
        chunk_prefill_size=chunk,
        max_num_seqs=len(seqs) + draw(st.integers(0, 2)),
        max_tokens=sum(q_lens) + draw(st.integers(0, 5)),
        q_heads=kv_heads * draw(st.sampled_from((1, 2, 4))), kv_heads=kv_heads,
        head_dim=draw(st.sampled_from((128, 64))),
        page_size=page_size, pages_per_seq=pages_per_seq,
        d_blocks=draw(_blocks(page_size, decode=True)),
        p_blocks=draw(_blocks(page_size, decode=False)),
        m_blocks=draw(_blocks(page_size, decode=False)),
        sliding_window=draw(st.one_of(st.none(), st.integers(1, capacity))),
        soft_cap=draw(st.sampled_from((None, 2.0, 20.0))),
        sm_scale=draw(st.sampled_from((1.0, 0.5))),
        logit_scale=draw(st.sampled_from((1.0, 4.0))),
        tpu_version=draw(st.sampled_from(TPU_VERSIONS)),
    )
