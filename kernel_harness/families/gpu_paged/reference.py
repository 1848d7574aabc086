"""Independent plain-jnp reference for gpu-paged: tokens gathered through the block tables,
visibility from the case, float32, HIGHEST."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from kernel_harness.families import gpu_common
from kernel_harness.families.decode_math import grouped_decode_attention
from kernel_harness.families.gpu_paged.cases import PagedCase


def visible(case: PagedCase) -> np.ndarray:
    """bool [batch, capacity]: token t of row b counts iff t < length_b."""
    return np.arange(case.capacity)[None, :] < np.array(
        [case.length(b) for b in range(case.batch)]
    )[:, None]


def paged_attention(q, k_pages, v_pages, tables, mask, soft_cap):
    """Gathers each row's tokens (token t: page tables[b, t // page_size], slot
    t % page_size) and attends over the visible ones; a row with none outputs 0."""
    kv_heads, _, page_size, dim = k_pages.shape
    batch, pages = tables.shape

    def gather(pages_):
        seq = pages_[:, tables]  # [kv_heads, batch, pages, page_size, dim]
        seq = seq.reshape(kv_heads, batch, pages * page_size, dim)
        # Non-visible slots may hold NaN poison: zero them before any arithmetic.
        return jnp.where(mask[None, :, :, None], seq, 0.0)

    return grouped_decode_attention(q, gather(k_pages), gather(v_pages), mask, soft_cap)


@functools.lru_cache(maxsize=64)
def _compiled(soft_cap: float | None):
    return gpu_common.jit(
        lambda q, k, v, t, m: {"out": paged_attention(q, k, v, t, m, soft_cap)}, cpu=True
    )


def reference(case: PagedCase, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """out in float32 (int8 pages dequantized with their per-token scales)."""
    k = np.asarray(inputs["k_pages"], np.float32)
    v = np.asarray(inputs["v_pages"], np.float32)
    if case.quantized:
        k = k * inputs["k_scales_pages"][..., None]
        v = v * inputs["v_scales_pages"][..., None]
    with jax.default_device(jax.devices("cpu")[0]):
        outs = _compiled(case.soft_cap)(
            jnp.asarray(inputs["q"], jnp.float32), jnp.asarray(k), jnp.asarray(v),
            jnp.asarray(inputs["block_tables"]), jnp.asarray(visible(case)),
        )
    return {n: np.asarray(x, np.float32) for n, x in outs.items()}
