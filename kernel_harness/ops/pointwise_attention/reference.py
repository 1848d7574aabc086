"""The pointwise-attention op's independent reference: two einsums at
``Precision.HIGHEST`` with a SiLU between them instead of a softmax, over the keys a dense
visibility lets through; gradients are ``jax.vjp`` of it. Nothing here comes from a kernel.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

#: The op's core, which a pointwise attention kernel computes inside its body, forward and
#: backward (``KernelExpectation.forward_computes``/``backward_computes``).
KERNEL_CORE = {"dot_general": "the logits q.k and the weighted values (dq, dk, dv backward)"}

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


@jax.jit
def _forward_and_grads(q, k, v, do, vis, scale):
    out, vjp = jax.vjp(lambda q, k, v: pointwise_attention(q, k, v, vis, scale), q, k, v)
    dq, dk, dv = vjp(do)
    return {"out": out, "dq": dq, "dk": dk, "dv": dv}


def pointwise_outputs(inputs: dict[str, np.ndarray], vis: np.ndarray, scale: float
                      ) -> dict[str, np.ndarray]:
    """``out``, ``dq``, ``dk``, ``dv`` (float32, HIGHEST) of q, k, v, do in ``inputs``
    (``[batch, len, heads, dim]``), ``vis`` ``[batch, heads or 1, q_len, kv_len]`` bool."""
    f32 = {name: jnp.asarray(inputs[name], jnp.float32) for name in ("q", "k", "v", "do")}
    result = _forward_and_grads(f32["q"], f32["k"], f32["v"], f32["do"], jnp.asarray(vis),
                                scale)
    return {name: np.asarray(x) for name, x in result.items()}
