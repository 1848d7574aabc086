"""Host-side block planning for the HSTU kernels: which (query block, key block)
tiles the static mask leaves non-empty, and which block each grid step fetches.

The tables are numpy arrays passed to the kernels as scalar-prefetched operands,
so a new mask of the same shape does not recompile.
"""

from __future__ import annotations

import collections
import hashlib
from typing import Any

import numpy as np

from kernel_harness.kernels.hstu.forward import BAND_UNBOUNDED


def band_of(causal: bool, window: int | None) -> tuple[int, int]:
    """``(min_d, max_d)`` with ``d = k_pos - q_pos`` allowed iff ``min_d <= d <= max_d``.

    Causal keeps ``d <= 0`` (top-left aligned: query i sees keys 0..i whatever the
    lengths); a window keeps ``|d| <= window``.
    """
    lo, hi = -BAND_UNBOUNDED, 0 if causal else BAND_UNBOUNDED
    if window is not None:
        lo, hi = max(lo, -window), min(hi, window)
    return lo, hi


def block_flags(
    q_len: int, kv_len: int, bq: int, bkv: int, band: tuple[int, int], mask: np.ndarray | None
) -> np.ndarray:
    """``[nq, nkv]`` bool: whether the static mask leaves the tile non-empty."""
    nq, nkv = q_len // bq, kv_len // bkv
    if mask is not None:
        d = np.arange(kv_len)[None, :] - np.arange(q_len)[:, None]
        dense = mask & (d >= band[0]) & (d <= band[1])
        return dense.reshape(nq, bq, nkv, bkv).any(axis=(1, 3))
    # k - q over a rectangle takes every integer between its extremes.
    i, j = np.arange(nq)[:, None], np.arange(nkv)[None, :]
    d_min = j * bkv - (i * bq + bq - 1)
    d_max = j * bkv + bkv - 1 - i * bq
    return (d_max >= band[0]) & (d_min <= band[1])


def fetch_table(flags: np.ndarray) -> np.ndarray:
    """Per row, the block each step fetches: itself when flagged, else the next flagged
    block of the row (or the last flagged one; 0 in an empty row)."""
    fetch = np.zeros(flags.shape, np.int32)
    for r, row in enumerate(flags):
        on = np.flatnonzero(row)
        if on.size:
            nxt = np.searchsorted(on, np.arange(row.size))
            fetch[r] = on[np.minimum(nxt, on.size - 1)]
    return fetch


def make_tables(
    mask: np.ndarray | None, causal: bool, window: int | None, q_len: int, kv_len: int,
    blocks: dict[str, int],
) -> dict[str, np.ndarray]:
    """Host-side block-sparsity tables and band for one call (numpy arrays)."""
    band = band_of(causal, window)
    fwd = block_flags(q_len, kv_len, blocks["block_q"], blocks["block_kv"], band, mask)
    bwd = block_flags(q_len, kv_len, blocks["block_q_dkv"], blocks["block_kv_dkv"], band, mask).T
    tables = {
        "fwd_flags": fwd.astype(np.int32),
        "fwd_fetch": fetch_table(fwd),
        "bwd_flags": bwd.astype(np.int32),
        "bwd_fetch": fetch_table(bwd),
        "band": np.asarray(band, np.int32),
    }
    if mask is not None:
        tables["mask"] = mask.astype(np.int32)
        tables["mask_t"] = np.ascontiguousarray(mask.T).astype(np.int32)
    return tables


_TABLE_CACHE: collections.OrderedDict[tuple[Any, ...], dict[str, np.ndarray]] = (
    collections.OrderedDict()
)
_TABLE_CACHE_SIZE = 32


def cached_tables(
    mask: np.ndarray | None, causal: bool, window: int | None, q_len: int, kv_len: int,
    blocks: dict[str, int],
) -> dict[str, np.ndarray]:
    """:func:`make_tables` behind a small LRU keyed by a digest of the mask's bits."""
    digest = None if mask is None else hashlib.sha1(np.packbits(mask).tobytes()).hexdigest()
    key = (digest, causal, window, q_len, kv_len, tuple(sorted(blocks.items())))
    if key in _TABLE_CACHE:
        _TABLE_CACHE.move_to_end(key)
        return _TABLE_CACHE[key]
    tables = make_tables(mask, causal, window, q_len, kv_len, blocks)
    _TABLE_CACHE[key] = tables
    if len(_TABLE_CACHE) > _TABLE_CACHE_SIZE:
        _TABLE_CACHE.popitem(last=False)
    return tables
