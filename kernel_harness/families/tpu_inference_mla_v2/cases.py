"""Cases of tpu-inference's MLA (multi-head latent attention) v2 kernel and the strategy.

A case is the ragged-passes vocabulary (:mod:`kernel_harness.ops.paged_attention.passes`) plus
MLA's shapes: query heads, the latent dimension (``lkv_dim``: the compressed KV, which is
both key and value) and the rope dimension (``r_dim``: a key part every head shares), the
passes' kv pages and queries per block, the mixed pass's query split, and the kernel's
two flash-attention variants.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

import numpy as np
from hypothesis import strategies as st

from kernel_harness.core import compat
from kernel_harness.core.case import cast, dtype_packing
from kernel_harness.families.tpu_inference.ragged import draw_attention, draw_paging
from kernel_harness.ops.paged_attention.passes import PassesCase, lanes, new_token_slots
from kernel_harness.ops.paged_attention.ragged import ragged_attention
from kernel_harness.ops.paged_attention.sequences import page_slots

#: dtypes drawn (q, the new latents and the cache share it; the logits' dtype s_dtype is
#: the input dtype; no fp8 cache, no q/k/v scales).
MLA_DTYPES: tuple[str, ...] = ("float32", "bfloat16")

Triple = tuple[int, int, int]

#: For a query dtype other than float32 the kernel normalizes its output with
#: ``pltpu.reciprocal``, which jax 0.10.2 lacks (AttributeError): bfloat16 is drawn only
#: where this jax has it.
BFLOAT16_RUNS = compat.pallas_tpu_has("reciprocal")

#: The dtypes drawn on this jax.
DRAWN_DTYPES = MLA_DTYPES if BFLOAT16_RUNS else ("float32",)


@dataclasses.dataclass(frozen=True, kw_only=True)
class MlaV2Case(PassesCase):
    """One ``mla_ragged_paged_attention`` call.

    Attributes:
      q_heads: query heads (one latent KV shared by all: MQA over the latent).
      lkv_dim, r_dim: the latent (key and value) and rope (key only) dimensions.
      kv_pages_per_block, queries_per_block: per pass (decode, prefill, mixed).
      mixed_q_split: the mixed pass's queries split this many ways (divides its block).
      two_step: two_step_flash_attention (QK and AV as separate steps).
      p_like_v: p_same_dtype_as_v (probabilities cast to the value dtype before AV).
    """

    q_heads: int
    lkv_dim: int = 128
    r_dim: int = 64
    kv_pages_per_block: Triple = (1, 1, 1)
    queries_per_block: Triple = (1, 8, 8)
    mixed_q_split: int = 1
    two_step: bool = True
    p_like_v: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.dtype not in MLA_DTYPES:
            raise ValueError(f"mla v2 cases take {MLA_DTYPES}, got {self.dtype!r}")
        if self.q_heads < 1 or self.lkv_dim < 1 or self.r_dim < 1:
            raise ValueError("q_heads, lkv_dim and r_dim must be >= 1")
        if self.page_size % dtype_packing(self.dtype):
            raise ValueError("page_size must be a multiple of the dtype's packing")
        if min(self.kv_pages_per_block + self.queries_per_block) < 1:
            raise ValueError("pages and queries per block must be >= 1")
        if self.mixed_q_split < 1 or self.queries_per_block[2] % self.mixed_q_split:
            raise ValueError("mixed_q_split must divide the mixed pass's queries_per_block")

    def cache_shape(self) -> tuple[int, ...]:
        """[pages, page_size / packing, packing, lanes(lkv_dim) + lanes(r_dim)]."""
        pack = dtype_packing(self.dtype)
        return (self.total_pages, self.page_size // pack, pack,
                lanes(self.lkv_dim) + lanes(self.r_dim))

    def shape_summary(self) -> str:
        return (f"ql_nope=({self.q_heads},{self.max_tokens},{self.lkv_dim}) r={self.r_dim} "
                f"cache={self.cache_shape()} seqs={self.num_seqs}/{self.max_num_seqs}")

    def materialize(self) -> dict[str, np.ndarray]:
        """ql_nope [heads, tokens, lkv], q_pe [tokens, heads, r], the new latents new_kv_c
        [tokens, lkv] and new_k_pe [tokens, r], the old cache (latent and rope lanes drawn,
        padding lanes zero as the kernel writes them), and the scalar operands."""
        rng = self.rng()
        t, h, lkv, r = self.max_tokens, self.q_heads, self.lkv_dim, self.r_dim
        scale = (lkv + r) ** -0.25
        cache = np.zeros(self.cache_shape())
        old = rng.standard_normal((*cache.shape[:3], lkv + r)) * scale
        cache[..., :lkv], cache[..., lanes(lkv):lanes(lkv) + r] = old[..., :lkv], old[..., lkv:]
        return {
            "ql_nope": cast(rng.standard_normal((h, t, lkv)) * scale * self.logit_scale,
                            self.dtype),
            "q_pe": cast(rng.standard_normal((t, h, r)) * scale * self.logit_scale, self.dtype),
            "new_kv_c": cast(rng.standard_normal((t, lkv)) * scale, self.dtype),
            "new_k_pe": cast(rng.standard_normal((t, r)) * scale, self.dtype),
            "cache_kv": cast(cache, self.dtype), **self.operands(),
        }


# The reference is plain functions of arrays and plain values (exported scripts embed
# their source and call mla_attention with the case's REFERENCE_FIELDS).

def updated_cache(cache: np.ndarray, new_tokens: Iterable[tuple[int, int, int]],
                  new_kv_c: np.ndarray, new_k_pe: np.ndarray) -> np.ndarray:
    """The cache after the call: each new token's slot (``new_tokens``: row of new_kv_c and
    new_k_pe, page, slot) holds its latent in lanes [0, lkv_dim), its rope key in
    [lanes(lkv_dim), + r_dim), zeros in the padding lanes; nothing else changes. Slot s of
    a page is row s // packing, column s % packing (packing: the cache's axis 2)."""
    cache = np.array(cache)
    pack, lkv, r = cache.shape[2], new_kv_c.shape[-1], new_k_pe.shape[-1]
    for row, page, slot in new_tokens:
        token = np.zeros(cache.shape[-1], cache.dtype)
        token[:lkv] = new_kv_c[row]
        token[lanes(lkv):lanes(lkv) + r] = new_k_pe[row]
        cache[page, slot // pack, slot % pack] = token
    return cache


def sequence_latents(cache: np.ndarray, pages: np.ndarray, slots: np.ndarray, lkv_dim: int,
                     r_dim: int) -> tuple[np.ndarray, np.ndarray]:
    """float32 latents [kv_len, lkv_dim] and rope keys [kv_len, r_dim] of the tokens at
    ``pages``, ``slots`` of ``cache``."""
    pack = cache.shape[2]
    tokens = cache[pages, slots // pack, slots % pack].astype(np.float32)
    return tokens[:, :lkv_dim], tokens[:, lanes(lkv_dim):lanes(lkv_dim) + r_dim]


#: The case fields :func:`mla_attention` takes (an exported script's ``CASE``).
REFERENCE_FIELDS = ("q_lens", "kv_lens", "page_size", "lkv_dim", "r_dim", "sm_scale",
                    "soft_cap", "sliding_window")


def mla_attention(inputs: dict[str, np.ndarray], table: np.ndarray, *, q_lens: Sequence[int],
                  kv_lens: Sequence[int], page_size: int, lkv_dim: int, r_dim: int,
                  sm_scale: float, soft_cap: float | None, sliding_window: int | None
                  ) -> dict[str, np.ndarray]:
    """The expected cache (:func:`updated_cache` through the page ``table``), then the
    attention op per sequence: queries [ql_nope | q_pe], one kv head with keys
    [latent | rope] and the latents as values (float32, HIGHEST)."""
    new_slots = new_token_slots(table, q_lens, kv_lens, page_size)
    cache = updated_cache(inputs["cache_kv"], new_slots, inputs["new_kv_c"],
                          inputs["new_k_pe"])
    q = np.concatenate([np.transpose(np.asarray(inputs["ql_nope"], np.float32), (1, 0, 2)),
                        np.asarray(inputs["q_pe"], np.float32)], axis=-1)
    kv = []
    for i, kv_len in enumerate(kv_lens):
        pages, slots = page_slots(table[i], kv_len, page_size)
        latent, rope = sequence_latents(cache, pages, slots, lkv_dim, r_dim)
        kv.append((np.concatenate([latent, rope], -1)[:, None], latent[:, None]))
    out = ragged_attention(q, kv, q_lens, kv_lens, sm_scale=sm_scale, soft_cap=soft_cap,
                           window=sliding_window, value_dim=lkv_dim)
    return {"out": np.transpose(out, (1, 0, 2)), "cache_kv": cache.astype(np.float32)}


@st.composite
def mla_v2_cases(draw: st.DrawFn, *, dtypes: tuple[str, ...] = DRAWN_DTYPES,
                 max_seqs: int = 4, without: frozenset[str] = frozenset()) -> MlaV2Case:
    """Valid :class:`MlaV2Case` s: the passes' sequences (:func:`draw_passes`), 1-8 query
    heads (odd counts too), latent 128 or 256 and rope 64 or 128 lanes, pages of 8 or 16
    tokens, 1..pages_per_seq kv pages and 1-16 queries per block per pass, the mixed pass
    split 1 or 2 ways, both flash-attention variants, windows, soft caps, large logits,
    float32 and (where this jax runs it: :data:`BFLOAT16_RUNS`) bfloat16."""
    del without  # nothing optional yet
    dtype, paging = draw_paging(draw, dtypes, max_seqs)
    split = draw(st.sampled_from((1, 2)))
    queries = (draw(st.sampled_from((1, 2))), draw(st.sampled_from((8, 4, 16))),
               split * draw(st.sampled_from((4, 1, 8))))
    return MlaV2Case(
        dtype=dtype, seed=draw(st.integers(0, 2**31 - 1)), **paging,
        q_heads=draw(st.sampled_from((4, 1, 3, 8))),
        lkv_dim=draw(st.sampled_from((128, 256))), r_dim=draw(st.sampled_from((64, 128))),
        kv_pages_per_block=tuple(draw(st.integers(1, paging["pages_per_seq"]))
                                 for _ in range(3)),
        queries_per_block=queries, mixed_q_split=split,
        two_step=draw(st.booleans()), p_like_v=draw(st.booleans()),
        **draw_attention(draw, paging),
    )
