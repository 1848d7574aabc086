"""Ragged paged attention whose call first writes the new tokens' K/V into the cache.

The vocabulary of such calls (heads, an optional fp8 cache with k/v scales, q quantized as
the kernel quantizes it), the exact cache update and the reference (the ragged op over the
updated cache), once for every kernel of this kind (tpu-inference's ragged paged attention
v3 and its head-dim-64 variant). Where K and V stand in a cache row is each kernel's
layout: a case says how a new token is written (:meth:`KvUpdateCase.write_token`) and
how a cached token is read (:meth:`KvUpdateCase.token_kv`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from hypothesis import strategies as st

from kernel_harness.core.case import check_heads, dtype_packing
from kernel_harness.ops.paged_decode.passes import PassesCase, effective_q
from kernel_harness.ops.paged_decode.ragged import ragged_attention

#: dtypes drawn for q (and for the new K/V and the cache, unless ``kv_dtype`` says fp8).
KV_UPDATE_DTYPES: tuple[str, ...] = ("float32", "bfloat16")

#: The quantized K/V cache dtype drawn.
FP8 = "float8_e4m3fn"


@dataclasses.dataclass(frozen=True, kw_only=True)
class KvUpdateCase(PassesCase):
    """The passes' sequences (:class:`~kernel_harness.ops.paged_decode.passes.PassesCase`),
    and

    Attributes:
      q_heads, kv_heads: query and kv heads.
      kv_dtype: the new K/V and the cache's dtype when quantized (``float8_e4m3fn``);
        None: ``dtype``.
      q_scale, k_scale, v_scale: the kernel's quantization scales (None: off). The real
        K is the stored K times k_scale (V likewise); with q_scale the kernel quantizes q
        to the cache dtype as ``q / q_scale`` and multiplies the logits back (a power of
        two, so the division is exact and the quantization one rounding).
    """

    q_heads: int
    kv_heads: int
    kv_dtype: str | None = None
    q_scale: float | None = None
    k_scale: float | None = None
    v_scale: float | None = None

    @property
    def cache_dtype(self) -> str:
        """The cache's dtype (and the new K/V's)."""
        return self.kv_dtype or self.dtype

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.dtype not in KV_UPDATE_DTYPES:
            raise ValueError(f"{type(self).__name__} takes dtypes {KV_UPDATE_DTYPES}, got "
                             f"{self.dtype!r}")
        check_heads(self)
        if self.kv_dtype not in (None, FP8):
            raise ValueError(f"kv_dtype must be None or {FP8!r}, got {self.kv_dtype!r}")
        if self.page_size % dtype_packing(self.cache_dtype):
            raise ValueError("page_size must be a multiple of the cache dtype's packing")
        for name in ("q_scale", "k_scale", "v_scale"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be > 0 (or None)")
        if self.q_scale is not None and (self.kv_dtype is None or np.log2(self.q_scale) % 1):
            raise ValueError("q_scale needs an fp8 cache and a power of two")

    def write_token(self, rows: np.ndarray, k: np.ndarray, v: np.ndarray) -> None:
        """Writes one new token's k and v [kv_heads, head_dim] into its cache ``rows``
        [rows, lanes] (every row of its slot), as the contract says the kernel does."""
        raise NotImplementedError

    def token_kv(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """K and V [..., kv_heads, head_dim] stored in cache ``rows`` [..., rows, lanes]."""
        raise NotImplementedError

    def updated_cache(self, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """The cache after the call, by the contract: each new token's slot
        (:meth:`~kernel_harness.ops.paged_decode.passes.PassesCase.new_tokens`) written
        (:meth:`write_token`); nothing else changes."""
        cache = np.array(inputs["kv_cache"])
        rows = cache.reshape(*cache.shape[:2], -1, cache.shape[-1])
        for row, page, slot in self.new_tokens():
            self.write_token(rows[page, slot], inputs["k"][row], inputs["v"][row])
        return rows.reshape(cache.shape)

    def sequence_kv(self, cache: np.ndarray, i: int) -> tuple[np.ndarray, np.ndarray]:
        """float32 K and V [kv_len, kv_heads, head_dim] of sequence i read from ``cache``,
        dequantized (times k_scale, v_scale)."""
        rows = cache.reshape(*cache.shape[:2], -1, cache.shape[-1]).astype(np.float32)
        k, v = self.token_kv(rows[self.sequence_slots(i)])
        return k * (self.k_scale or 1.0), v * (self.v_scale or 1.0)


def kv_update_reference(case: KvUpdateCase, inputs: dict[str, np.ndarray]
                        ) -> dict[str, np.ndarray]:
    """The expected cache (:meth:`KvUpdateCase.updated_cache`) and attention over it by
    the ragged paged attention op (float32, HIGHEST) with the inputs' ``attention_sink``
    when there are any, K/V dequantized and q quantized as the kernel quantizes it
    (:func:`~kernel_harness.ops.paged_decode.passes.effective_q`)."""
    cache = case.updated_cache(inputs)
    kv = (case.sequence_kv(cache, i) for i in range(case.num_seqs))
    out = ragged_attention(effective_q(case, inputs["q"]), kv, case.q_lens, case.kv_lens,
                           sm_scale=case.sm_scale, soft_cap=case.soft_cap,
                           window=case.sliding_window, sinks=inputs.get("attention_sink"))
    return {"out": out, "kv_cache": cache.astype(np.float32)}


@st.composite
def fp8_scales(draw: st.DrawFn) -> dict[str, Any]:
    """The :class:`KvUpdateCase` fields of an fp8 cache: k/v scales or none, q quantized
    (a power-of-two scale) or not."""
    return dict(kv_dtype=FP8, q_scale=draw(st.sampled_from((None, 0.25, 0.5))),
                k_scale=draw(st.sampled_from((None, 0.05, 0.2))),
                v_scale=draw(st.sampled_from((None, 0.5, 0.1))))


@st.composite
def fp8_quantization(draw: st.DrawFn) -> dict[str, Any]:
    """Half the cases an fp8 cache (:func:`fp8_scales`), the other half none."""
    return draw(fp8_scales()) if draw(st.booleans()) else {}
