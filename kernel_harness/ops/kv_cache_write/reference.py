"""The kv-cache write op's reference: sequence i's j-th new token (row cu_new_lens[i] + j
of k and v) lands at position cache_lens[i] + j of its page-table row; nothing else of the
cache changes. The slots come from the ragged kv-update's
:func:`~kernel_harness.ops.paged_attention.passes.new_token_slots`, the copy from its
:func:`~kernel_harness.ops.paged_attention.kv_update.updated_cache`; the layout of a
token's row pair is :func:`write_token`'s. Plain numpy of arrays and plain values:
exported scripts embed this source."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kernel_harness.ops.paged_attention.kv_update import updated_cache
from kernel_harness.ops.paged_attention.passes import new_token_slots

#: The op's outputs and their axes: the cache's values, and its bit patterns (as
#: unsigned integers of the element's width, exact in float32) that make the
#: comparison bit for bit: -0.0 against 0.0, or a subnormal flushed, differs by >= 1.
OUTPUT_AXES = {"kv_cache": ("page", "slot", "head", "dim"),
               "kv_cache_bits": ("page", "slot", "head", "dim")}


def write_token(rows: np.ndarray, k: np.ndarray, v: np.ndarray) -> None:
    """The merged interleaved layout of one token (k, v [kv_heads, head_dim]) in its slot's
    ``rows`` [2 * kv_heads, head_dim]: K of kv head h in row 2h, its V in row 2h + 1."""
    rows[0::2] = k
    rows[1::2] = v


def cache_bits(cache: np.ndarray) -> np.ndarray:
    """The bit pattern of every element of ``cache`` as an unsigned integer, in float32
    (exact: 16-bit patterns, and float32's own bits are not asked for)."""
    width = np.dtype(cache.dtype).itemsize
    if width > 2:
        raise ValueError(f"cache_bits takes 16-bit caches (bfloat16, float16), got "
                         f"{cache.dtype}")
    return cache.view(np.uint16).astype(np.float32)


def kv_cache_write(kv_cache: np.ndarray, k: np.ndarray, v: np.ndarray, table: np.ndarray,
                   cache_lens: Sequence[int], new_lens: Sequence[int], page_size: int
                   ) -> dict[str, np.ndarray]:
    """The cache after the write (in the cache's dtype: a copy, no arithmetic), as
    float32 values and as bits (:func:`cache_bits`)."""
    kv_lens = [c + n for c, n in zip(cache_lens, new_lens, strict=True)]
    slots = new_token_slots(table, new_lens, kv_lens, page_size)
    cache = updated_cache(kv_cache, slots, k, v, write_token)
    return {"kv_cache": cache.astype(np.float32), "kv_cache_bits": cache_bits(cache)}
