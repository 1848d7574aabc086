"""Ragged paged attention whose call first writes the new tokens' K/V into the cache.

The vocabulary of such calls (heads, an optional fp8 cache with k/v scales, q quantized as
the kernel quantizes it), the exact cache update and the reference (the ragged op over the
updated cache), once for every kernel of this kind (tpu-inference's ragged paged attention
v3 and its head-dim-64 variant). Where K and V stand in a cache row is each kernel's
layout: a case points at its module's functions saying how a new token is written
(:meth:`KvUpdateCase.write_token`) and how a cached token is read
(:meth:`KvUpdateCase.token_kv`). The cache update and the reference are plain functions of
arrays and plain values, so exported scripts embed their source.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from hypothesis import strategies as st

from kernel_harness.core.case import check_heads, check_sizes, dtype_packing
from kernel_harness.ops.paged_attention.passes import PassesCase, effective_q, new_token_slots
from kernel_harness.ops.paged_attention.ragged import ragged_attention
from kernel_harness.ops.paged_attention.sequences import page_slots

#: dtypes drawn for q (and for the new K/V and the cache, unless ``kv_dtype`` says fp8).
KV_UPDATE_DTYPES: tuple[str, ...] = ("float32", "bfloat16")

#: The quantized K/V cache dtype drawn.
FP8 = "float8_e4m3fn"

#: The axes of such a kernel's ``out`` and of its updated ``kv_cache`` (K and V per token).
OUTPUT_AXES: dict[str, tuple[str, ...]] = {
    "out": ("token", "head", "dim"), "kv_cache": ("page", "slot", "head", "pack", "lane")}


@dataclasses.dataclass(frozen=True, kw_only=True)
class KvUpdateCase(PassesCase):
    """The passes' sequences (:class:`~kernel_harness.ops.paged_attention.passes.PassesCase`),
    and

    Attributes:
      q_heads, kv_heads: query and kv heads.
      kv_dtype: the new K/V and the cache's dtype when quantized (``float8_e4m3fn``);
        None: ``dtype``.
      q_scale, k_scale, v_scale: the kernel's quantization scales (None: off). The real
        K is the stored K times k_scale (V likewise); with q_scale the kernel quantizes q
        to the cache dtype as ``q / q_scale`` and multiplies the logits back (a power of
        two, so the division is exact and the quantization one rounding).

    A family's case adds ``head_dim`` (a field or a property; checked on construction) and
    its layout (:meth:`write_token`, :meth:`token_kv`).
    """

    q_heads: int
    kv_heads: int
    kv_dtype: str | None = None
    q_scale: float | None = None
    k_scale: float | None = None
    v_scale: float | None = None
    if TYPE_CHECKING:  # not a field: a subclass gives it as a field or a property
        head_dim: int

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
        if not isinstance(getattr(self, "head_dim", None), int):
            raise TypeError(f"{type(self).__name__} must give head_dim, an int (a field or a "
                            f"property), got {getattr(self, 'head_dim', None)!r}")
        check_sizes(self, "head_dim")
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

    @staticmethod
    def write_token(rows: np.ndarray, k: np.ndarray, v: np.ndarray) -> None:
        """Writes one new token's k and v [kv_heads, head_dim] into its cache ``rows``
        [rows, lanes] (every row of its slot), as the contract says the kernel does: a
        family's case points this at its module's layout function."""
        raise NotImplementedError

    @staticmethod
    def token_kv(rows: np.ndarray, kv_heads: int, head_dim: int
                 ) -> tuple[np.ndarray, np.ndarray]:
        """K and V [..., kv_heads, head_dim] stored in cache ``rows`` [..., rows, lanes]
        (the family's layout function, as :meth:`write_token`)."""
        raise NotImplementedError

    def updated_cache(self, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """The cache after the call (:func:`updated_cache` with this case's new tokens and
        layout)."""
        return updated_cache(inputs["kv_cache"], self.new_tokens(), inputs["k"], inputs["v"],
                             self.write_token)

    def sequence_kv(self, cache: np.ndarray, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Sequence i's float32 K and V read from ``cache`` (:func:`sequence_kv`)."""
        return sequence_kv(cache, *self.sequence_slots(i), self.token_kv, self.kv_heads,
                           self.head_dim, self.k_scale, self.v_scale)


# The reference is plain functions of arrays and plain values (exported scripts embed
# their source and call kv_update_attention with the case's REFERENCE_FIELDS).

def updated_cache(cache: np.ndarray, new_tokens: Iterable[tuple[int, int, int]],
                  k: np.ndarray, v: np.ndarray, write_token: Callable[..., None]
                  ) -> np.ndarray:
    """The cache after the call, by the contract: each new token's slot (``new_tokens``:
    row of k and v, page, slot) written by ``write_token`` (the kernel's layout) into a
    copy of ``cache``; nothing else changes."""
    cache = np.array(cache)
    rows = cache.reshape(*cache.shape[:2], -1, cache.shape[-1])
    for row, page, slot in new_tokens:
        write_token(rows[page, slot], k[row], v[row])
    return rows.reshape(cache.shape)


def sequence_kv(cache: np.ndarray, pages: np.ndarray, slots: np.ndarray,
                token_kv: Callable[..., tuple[np.ndarray, np.ndarray]], kv_heads: int,
                head_dim: int, k_scale: float | None, v_scale: float | None
                ) -> tuple[np.ndarray, np.ndarray]:
    """float32 K and V [kv_len, kv_heads, head_dim] of the tokens at ``pages``, ``slots``
    read from ``cache`` by ``token_kv`` (the kernel's layout), dequantized (times
    k_scale, v_scale)."""
    rows = cache.reshape(*cache.shape[:2], -1, cache.shape[-1]).astype(np.float32)
    k, v = token_kv(rows[pages, slots], kv_heads, head_dim)
    return k * (k_scale or 1.0), v * (v_scale or 1.0)


#: The case fields :func:`kv_update_attention` takes (an exported script's ``CASE``).
REFERENCE_FIELDS = ("q_lens", "kv_lens", "page_size", "kv_heads", "head_dim", "q_scale",
                    "k_scale", "v_scale", "cache_dtype", "sm_scale", "soft_cap",
                    "sliding_window")


def kv_update_attention(inputs: dict[str, np.ndarray], table: np.ndarray,
                        write_token: Callable[..., None],
                        token_kv: Callable[..., tuple[np.ndarray, np.ndarray]], *,
                        q_lens: Sequence[int], kv_lens: Sequence[int], page_size: int,
                        kv_heads: int, head_dim: int, q_scale: float | None,
                        k_scale: float | None, v_scale: float | None, cache_dtype: str,
                        sm_scale: float, soft_cap: float | None,
                        sliding_window: int | None) -> dict[str, np.ndarray]:
    """The expected cache (:func:`updated_cache` through the page ``table``) and the
    attention over it by the ragged paged attention op (float32, HIGHEST) with the
    inputs' ``attention_sink`` when there are any, K/V dequantized
    (:func:`sequence_kv`) and q quantized as the kernel quantizes it
    (:func:`~kernel_harness.ops.paged_attention.passes.effective_q`)."""
    new_slots = new_token_slots(table, q_lens, kv_lens, page_size)
    cache = updated_cache(inputs["kv_cache"], new_slots, inputs["k"], inputs["v"], write_token)
    kv = (sequence_kv(cache, *page_slots(table[i], kv_len, page_size), token_kv, kv_heads,
                      head_dim, k_scale, v_scale) for i, kv_len in enumerate(kv_lens))
    out = ragged_attention(effective_q(inputs["q"], q_scale, cache_dtype), kv, q_lens,
                           kv_lens, sm_scale=sm_scale, soft_cap=soft_cap,
                           window=sliding_window, sinks=inputs.get("attention_sink"))
    return {"out": out, "kv_cache": cache.astype(np.float32)}


def kv_update_reference(case: KvUpdateCase, inputs: dict[str, np.ndarray]
                        ) -> dict[str, np.ndarray]:
    """:func:`kv_update_attention` on the case's page table, layout and
    :data:`REFERENCE_FIELDS`."""
    return kv_update_attention(inputs, case.page_table(), case.write_token, case.token_kv,
                               **{f: getattr(case, f) for f in REFERENCE_FIELDS})


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
