"""Cases of tpu-inference's ragged paged attention v3 and the strategy.

A case is the ragged-passes vocabulary (:mod:`kernel_harness.ops.paged_attention.passes`:
sequences, passes, padding, pages, window, cap, scale, TPU generation) plus the kernel's
heads and the three passes' block sizes (memory and compute). The new tokens' K/V, the old
cache, the page table and the junk in padding slots come from the seed.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import strategies as st

from kernel_harness.core.case import cast, dtype_packing
from kernel_harness.families.tpu_inference.ragged import draw_attention, draw_paging
from kernel_harness.ops.paged_attention.kv_update import (
    KV_UPDATE_DTYPES,
    KvUpdateCase,
    fp8_quantization,
)
from kernel_harness.ops.paged_attention.passes import align, lanes

#: dtypes drawn for q (and for the new K/V and the cache, unless ``kv_dtype`` says fp8).
RPA_DTYPES: tuple[str, ...] = KV_UPDATE_DTYPES

#: Features an implementation may declare it lacks (``--without``).
OPTIONAL: dict[str, str] = {"fp8": "no fp8 K/V cache and no q/k/v scales"}

#: TPU generations the kernel is told it runs on (``get_tpu_version``): 5 and 6 share its
#: default block table; 6+ narrows the mask's position arithmetic to int16 for packed
#: (bfloat16) queries; 7 places q/kv/cache in HBM explicitly (another program).
TPU_VERSIONS: tuple[int, ...] = (5, 6, 7)

Blocks = tuple[int, int, int, int]


def write_token(rows: np.ndarray, k: np.ndarray, v: np.ndarray) -> None:
    """The kernel's layout of a new token (k, v [kv_heads, head_dim]) in its slot's
    ``rows``: K of kv head h in combined head (row) 2h, its V in 2h+1, lanes past head_dim
    untouched (exported scripts embed this source)."""
    heads, d = 2 * k.shape[0], k.shape[1]
    rows[0:heads:2, :d] = k
    rows[1:heads:2, :d] = v


def token_kv(rows: np.ndarray, kv_heads: int, head_dim: int
             ) -> tuple[np.ndarray, np.ndarray]:
    """K from the even combined heads of cache ``rows`` [..., rows, lanes], V from the odd
    ones, the head_dim first lanes (exported scripts embed this source)."""
    heads = 2 * kv_heads
    return rows[..., 0:heads:2, :head_dim], rows[..., 1:heads:2, :head_dim]


@dataclasses.dataclass(frozen=True, kw_only=True)
class RpaV3Case(KvUpdateCase):
    """One ``ragged_paged_attention`` (v3) call: the passes' sequences, heads and
    quantization (:class:`~kernel_harness.ops.paged_attention.kv_update.KvUpdateCase`), and

    Attributes:
      head_dim: the head dimension (64 is padded to 128 lanes).
      d_blocks, p_blocks, m_blocks: (bq_sz, bkv_sz, bq_csz, bkv_csz) of each pass: query
        and kv tokens fetched per block, and the compute blocks within them.
      tpu_version: the TPU generation the kernel is told it runs on.

    Its cache layout is :func:`write_token` and :func:`token_kv`.
    """

    head_dim: int = 128
    d_blocks: Blocks = (1, 8, 1, 8)
    p_blocks: Blocks = (8, 16, 8, 8)
    m_blocks: Blocks = (8, 16, 8, 8)
    tpu_version: int = 6

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.tpu_version not in TPU_VERSIONS:
            raise ValueError(f"tpu_version must be one of {TPU_VERSIONS}")
        for name in ("d_blocks", "p_blocks", "m_blocks"):
            bq, bkv, bq_c, bkv_c = getattr(self, name)
            if bq % bq_c or bkv % bkv_c or bkv % self.page_size or bkv_c % self.page_size:
                raise ValueError(f"{name}={getattr(self, name)}: compute blocks must divide "
                                 "the fetched ones, kv blocks be multiples of page_size")

    write_token = staticmethod(write_token)
    token_kv = staticmethod(token_kv)

    def cache_shape(self) -> tuple[int, ...]:
        """[pages, page_size, combined heads / packing, packing, head_dim padded to 128]."""
        pack = dtype_packing(self.cache_dtype)
        return (self.total_pages, self.page_size, align(2 * self.kv_heads, pack) // pack,
                pack, lanes(self.head_dim))

    def shape_summary(self) -> str:
        return (f"q=({self.max_tokens},{self.q_heads},{self.head_dim}) cache={self.cache_shape()}"
                f" seqs={self.num_seqs}/{self.max_num_seqs} tpu_v{self.tpu_version}")

    def materialize(self) -> dict[str, np.ndarray]:
        """q, the new tokens' k and v [max_tokens, heads, head_dim] (padding rows too), the
        old cache (every real lane drawn, lanes past head_dim zero as the kernel writes
        them), kv_lens, page_indices (flat), cu_q_lens, distribution. Quantized K/V are
        the real ones divided by their scale, rounded to the cache dtype."""
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
        ks, vs, kv = self.k_scale or 1.0, self.v_scale or 1.0, self.cache_dtype
        cache_heads[:, :, 0: 2 * self.kv_heads: 2] /= ks
        cache_heads[:, :, 1: 2 * self.kv_heads: 2] /= vs
        return {
            "q": cast(q, self.dtype), "k": cast(k / ks, kv), "v": cast(v / vs, kv),
            "kv_cache": cast(cache_heads.reshape(cache.shape), kv), **self.operands(),
        }


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
    bfloat16 queries, and half the time an fp8 cache with k/v scales and q quantized or not
    (``without={"fp8"}``: never). Shrinks towards one float32 sequence in the mixed pass, on v5."""
    dtype, paging = draw_paging(draw, dtypes, max_seqs)
    kv_heads = draw(st.sampled_from((1, 2, 4)))
    return RpaV3Case(
        dtype=dtype, seed=draw(st.integers(0, 2**31 - 1)), **paging,
        q_heads=kv_heads * draw(st.sampled_from((1, 2, 4))), kv_heads=kv_heads,
        head_dim=draw(st.sampled_from((128, 64))),
        d_blocks=draw(_blocks(paging["page_size"], decode=True)),
        p_blocks=draw(_blocks(paging["page_size"], decode=False)),
        m_blocks=draw(_blocks(paging["page_size"], decode=False)),
        **draw_attention(draw, paging),
        tpu_version=draw(st.sampled_from(TPU_VERSIONS)),
        **(draw(fp8_quantization()) if "fp8" not in without else {}),
    )
