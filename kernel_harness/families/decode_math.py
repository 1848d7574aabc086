"""Plain-jnp decode attention shared by the references of the paged families (tpu-paged,
gpu-paged): both gather a row's tokens through its page table first, in their own way,
then attend the same way. Float32 at Precision.HIGHEST; nothing here comes from a kernel.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

_HI = jax.lax.Precision.HIGHEST


def grouped_decode_attention(q, k, v, mask, soft_cap):
    """One query per row over its gathered tokens.

    q [batch, q_heads, dim]; k, v [kv_heads, batch, tokens, dim] with non-visible tokens
    already zeroed; mask bool [batch, tokens]. Query head h reads kv head
    ``h // (q_heads / kv_heads)``; ``soft_cap`` (or None) caps the logits as
    ``cap * tanh(s / cap)``; masked tokens get exactly zero weight and a row with no
    visible token gives 0.
    """
    kv_heads, batch, _, dim = k.shape
    group = q.shape[1] // kv_heads
    qg = q.reshape(batch, kv_heads, group, dim)
    s = jnp.einsum("bkgd,kbtd->bkgt", qg, k, precision=_HI)
    if soft_cap is not None:
        s = soft_cap * jnp.tanh(s / soft_cap)
    vis = mask[:, None, None, :]
    s = jnp.where(vis, s, -jnp.inf)
    m = jnp.max(s, axis=-1, keepdims=True)
    p = jnp.where(vis, jnp.exp(s - jnp.where(jnp.isfinite(m), m, 0.0)), 0.0)
    denom = jnp.sum(p, axis=-1, keepdims=True)
    p = p / jnp.where(denom > 0, denom, 1.0)
    out = jnp.einsum("bkgt,kbtd->bkgd", p, v, precision=_HI)
    return out.reshape(batch, kv_heads * group, dim)
