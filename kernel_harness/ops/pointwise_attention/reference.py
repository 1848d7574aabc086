"""The pointwise-attention op's independent reference: two einsums at
``Precision.HIGHEST`` with a SiLU between them instead of a softmax, over the keys a dense
visibility lets through; gradients are ``jax.vjp`` of it. Nothing here comes from a kernel.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

HIGHEST = jax.lax.Precision.HIGHEST


def pointwise_attention(q: jax.Array, k: jax.Array, v: jax.Array, vis: jax.Array,
                        scale: float,
                        precision: jax.lax.Precision | None = HIGHEST) -> jax.Array:
    """``(vis * silu(scale q k^T) / q_len) v`` on ``[batch, len, heads, dim]`` arrays;
    ``vis`` is ``[batch, heads or 1, q_len, kv_len]`` bool (masked keys weigh exactly 0)."""
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k, precision=precision) * scale
    pointwise = s * jax.nn.sigmoid(s) / q.shape[1]
    p = jnp.where(vis, pointwise, 0.0)
    return jnp.einsum("bhqk,bkhd->bqhd", p, v, precision=precision)
