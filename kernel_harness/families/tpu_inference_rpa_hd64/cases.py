"""Cases of tpu-inference's ragged paged attention v3 for head_dim 64 and the strategy.

A case is the ragged-passes vocabulary (:mod:`kernel_harness.ops.paged_attention.passes`:
sequences, passes, padding, pages, window, cap, scale) plus the kernel's heads, its one
pair of block sizes (kv pages and queries per block), the attention sinks and the
quantized cache. The layout is this variant's own: a cache row holds a kv head's K in
lanes 0-63 and its V in lanes 64-127, kv heads packed ``packing`` per 32-bit word.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import strategies as st

from kernel_harness.core.case import cast, dtype_packing
from kernel_harness.families.tpu_inference.ragged import draw_attention, draw_paging
from kernel_harness.ops.paged_attention.kv_update import KV_UPDATE_DTYPES, KvUpdateCase, fp8_scales
from kernel_harness.ops.paged_attention.passes import align

#: The head dimension of this kernel (its only one).
HEAD_DIM = 64
#: Features an implementation may declare it lacks (``--without``).
OPTIONAL: dict[str, str] = {"fp8": "no fp8 K/V cache and no q/k/v scales",
                            "sinks": "no attention sinks"}


def write_token(rows: np.ndarray, k: np.ndarray, v: np.ndarray) -> None:
    """The kernel's layout of a new token (k, v [kv_heads, 64]) in its slot's ``rows``: kv
    head h's K in lanes 0-63 and its V in lanes 64-127 of row h, zeros in the padding
    heads' rows (the kernel writes whole packed words, padded with zeros; exported scripts
    embed this source)."""
    heads, d = k.shape
    rows[:heads, :d] = k
    rows[:heads, d:] = v
    rows[heads:] = 0


def token_kv(rows: np.ndarray, kv_heads: int, head_dim: int
             ) -> tuple[np.ndarray, np.ndarray]:
    """K from lanes 0-63 and V from lanes 64-127 of the kv heads' rows of cache ``rows``
    [..., rows, lanes] (exported scripts embed this source)."""
    heads = rows[..., :kv_heads, :]
    return heads[..., :head_dim], heads[..., head_dim:]


@dataclasses.dataclass(frozen=True, kw_only=True)
class RpaHd64Case(KvUpdateCase):
    """One ``ragged_paged_attention_hd64`` call: the passes' sequences, heads (head_dim is
    64) and quantization (:class:`~kernel_harness.ops.paged_attention.kv_update.KvUpdateCase`),
    and

    Attributes:
      kv_pages_per_block, queries_per_block: the kernel's block sizes (every pass).
      sinks: an attention-sink logit per query head (float32), or none.

    Its cache layout is :func:`write_token` and :func:`token_kv`.
    """

    kv_pages_per_block: int = 2
    queries_per_block: int = 8
    sinks: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.kv_pages_per_block < 1 or self.queries_per_block < 1:
            raise ValueError("kv_pages_per_block and queries_per_block must be >= 1")

    write_token = staticmethod(write_token)
    token_kv = staticmethod(token_kv)

    @property
    def head_dim(self) -> int:
        """:data:`HEAD_DIM`, the kernel's only head dimension."""
        return HEAD_DIM

    def cache_shape(self) -> tuple[int, ...]:
        """[pages, page_size, kv heads / packing, packing, 128]."""
        pack = dtype_packing(self.cache_dtype)
        return (self.total_pages, self.page_size, align(self.kv_heads, pack) // pack, pack,
                2 * HEAD_DIM)

    def shape_summary(self) -> str:
        sinks = " sinks" if self.sinks else ""
        return (f"q=({self.max_tokens},{self.q_heads},{HEAD_DIM}) cache={self.cache_shape()}"
                f" seqs={self.num_seqs}/{self.max_num_seqs} blocks={self.kv_pages_per_block}p"
                f"x{self.queries_per_block}q{sinks}")

    def materialize(self) -> dict[str, np.ndarray]:
        """q, the new tokens' k and v [max_tokens, heads, 64] (padding rows too), the old
        cache (every lane drawn, the padding heads too: a kernel must not read them),
        the sinks [q_heads] float32 when drawn, and the scalar operands. Quantized K/V are
        the real ones divided by their scale, rounded to the cache dtype."""
        rng = self.rng()
        t, d = self.max_tokens, HEAD_DIM
        q = rng.standard_normal((t, self.q_heads, d)) * self.logit_scale * d**-0.25
        k = rng.standard_normal((t, self.kv_heads, d)) * d**-0.25
        v = rng.standard_normal((t, self.kv_heads, d))
        shape = self.cache_shape()
        rows = rng.standard_normal((shape[0], shape[1], shape[2] * shape[3], 2 * d))
        rows[..., :d] *= d**-0.25
        ks, vs, kv = self.k_scale or 1.0, self.v_scale or 1.0, self.cache_dtype
        rows[..., :d] /= ks
        rows[..., d:] /= vs
        inputs = {"q": cast(q, self.dtype), "k": cast(k / ks, kv), "v": cast(v / vs, kv),
                  "kv_cache": cast(rows.reshape(shape), kv), **self.operands()}
        if self.sinks:
            inputs["attention_sink"] = (rng.standard_normal(self.q_heads) * 2
                                        * self.logit_scale).astype(np.float32)
        return inputs


def sinks_supported(dtype: str, ratio: int) -> bool:
    """Whether the kernel takes sinks with ``dtype`` queries and ``ratio`` query heads per
    kv head: it pads each group of q heads to the dtype's packing but not the sinks, so a
    ratio that is not a multiple of it (bfloat16, ratio 1) fails or reads past the sinks
    (findings/tpu-inference-rpa-hd64-sinks-bf16-odd-head-groups)."""
    return ratio % dtype_packing(dtype) == 0


@st.composite
def rpa_hd64_cases(draw: st.DrawFn, *, dtypes: tuple[str, ...] = KV_UPDATE_DTYPES,
                   max_seqs: int = 4, without: frozenset[str] = frozenset()) -> RpaHd64Case:
    """Valid :class:`RpaHd64Case` s: the passes of :func:`draw_passes` (1-4 sequences,
    decode, prefill and mixed, padding), MHA/GQA/MQA with 1-3 kv heads (odd counts leave a
    padding head in a packed word), pages of 8 or 16 tokens, blocks of 1-4 pages and 1-16
    queries, sinks in half the cases where the kernel takes them (:func:`sinks_supported`),
    windows, soft caps, large logits, float32 and bfloat16, half the time an fp8 cache with
    scales (``without`` drops fp8 or sinks).
    Shrinks towards one float32 sequence in the mixed pass without sinks."""
    dtype, paging = draw_paging(draw, dtypes, max_seqs)
    kv_heads = draw(st.sampled_from((1, 2, 3)))
    ratio = draw(st.sampled_from((1, 2, 4)))
    quantized = "fp8" not in without and draw(st.booleans())
    return RpaHd64Case(
        dtype=dtype, seed=draw(st.integers(0, 2**31 - 1)), **paging,
        q_heads=kv_heads * ratio, kv_heads=kv_heads,
        kv_pages_per_block=draw(st.sampled_from((1, 2, 4))),
        queries_per_block=draw(st.sampled_from((8, 1, 4, 16))),
        sinks=("sinks" not in without and sinks_supported(dtype, ratio)
               and draw(st.booleans())),
        **draw_attention(draw, paging),
        **(draw(fp8_scales()) if quantized else {}),
    )
