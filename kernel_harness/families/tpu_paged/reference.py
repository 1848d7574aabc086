"""Independent plain-jnp reference for tpu-paged: each row's tokens gathered through its
page table (numpy indices built from the case), visibility ``t < length`` from the case,
softmax attention in float32 at Precision.HIGHEST.

K/V are first brought to the values the kernel's contract computes with (see the family
CONTRACT): int8 pages dequantized as ``w * scale / 127.5``; float pages rounded to
bfloat16 (round to nearest even), exactly as the kernel converts every loaded K/V block.
Nothing else is rounded: q, the logits, the softmax and the sums stay float32, so a
kernel that rounds any of those shows.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from kernel_harness.families.decode_math import grouped_decode_attention
from kernel_harness.families.tpu_paged.cases import INT8_DIVISOR, TpuPagedCase


def visible(case: TpuPagedCase) -> np.ndarray:
    """bool [batch, capacity]: token t of row b counts iff t < lengths[b]."""
    return np.arange(case.capacity)[None, :] < np.asarray(case.lengths)[:, None]


def token_index(case: TpuPagedCase, table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """int [batch, capacity] twice: the physical page and the slot of token t of row b
    (token t lives in page table[b, t // page_size] at slot t % page_size)."""
    t = np.arange(case.capacity)
    return table[:, t // case.page_size], np.broadcast_to(t % case.page_size, table.shape[:1]
                                                          + t.shape)


@functools.lru_cache(maxsize=64)
def _compiled(soft_cap: float | None):
    return jax.jit(lambda q, k, v, m: {"out": grouped_decode_attention(q, k, v, m, soft_cap)})


def kv_values(case: TpuPagedCase, inputs: dict[str, np.ndarray]) -> tuple[np.ndarray, ...]:
    """float32 K and V pages as the contract computes with them (see the module doc)."""
    if case.quantized:
        k = inputs["k_pages"].astype(np.float64) * inputs["k_scales"] / INT8_DIVISOR
        v = inputs["v_pages"].astype(np.float64) * inputs["v_scales"] / INT8_DIVISOR
        return k.astype(np.float32), v.astype(np.float32)
    return tuple(
        np.asarray(inputs[n], np.float32).astype(jnp.bfloat16).astype(np.float32)
        for n in ("k_pages", "v_pages")
    )


def reference(case: TpuPagedCase, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """out [batch, q_heads, head_dim] in float32."""
    k, v = kv_values(case, inputs)
    pages, slots = token_index(case, np.asarray(inputs["page_indices"]))
    mask = visible(case)

    def gather(x):  # [kv_heads, batch, capacity, dim]; NaN poison never enters arithmetic
        return np.where(mask[None, :, :, None], x[:, pages, slots], 0.0).astype(np.float32)

    with jax.default_device(jax.devices("cpu")[0]):
        outs = _compiled(case.soft_cap)(
            jnp.asarray(inputs["q"], jnp.float32), jnp.asarray(gather(k)),
            jnp.asarray(gather(v)), jnp.asarray(mask),
        )
    return {n: np.asarray(x, np.float32) for n, x in outs.items()}
