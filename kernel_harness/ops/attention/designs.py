"""Precision designs: where a kernel rounds inside its attention, as the calibrated judge's
low-precision twin models it (README "Calibrated bounds"; :func:`~.program.references`).

The twin is "the same math in the case's dtype": by default (``plain``) :func:`~.reference.
attend` run in that dtype at the default matmul precision, every intermediate rounded to
it. A kernel built the FlashAttention way rounds elsewhere, and less: its error is not that
twin's: at 16x logits a bfloat16 FlashAttention-style kernel (flywheel-tpu 0.3.0's
``flash_attn_func``) fails the plain twin's bound and passes its own design's (the numbers:
docs/judge.md, "Calibrated bounds"). A kernel declares its design
(``Features.precision_design``), and its twin rounds where it rounds:

- ``plain``: every intermediate in the input dtype (jax.nn's math in bfloat16).
- ``flash``: FlashAttention's numerics. Forward: q times ``scale * log2(e)`` rounded to the
  input dtype, the logits and the softmax in float32 in base 2, the probabilities rounded
  to the input dtype for the P.V product, float32 accumulation, the output divided by the
  row sum and rounded. Backward: ``D = rowsum(dO * O)``, ``dP = dO.V^T`` and ``P`` in
  float32, ``dS = P * (dP - D)`` rounded to the input dtype, ``dQ = scale * dS.K``,
  ``dK = scale * dS^T.Q``, ``dV = P^T.dO`` (P rounded) with float32 accumulation, each
  rounded. A bias, a soft cap and sinks are not modelled (an error says so).

The float32 reference is exact math whatever the design: a design moves the yardstick of
the calibrated bound, never the answer.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from kernel_harness.ops.attention.vocabulary import heads_first

#: The precision designs a kernel may declare (module docstring).
DESIGNS: tuple[str, ...] = ("plain", "flash")
_LOG2E = math.log2(math.e)
_LN2 = math.log(2.0)
_F32 = jnp.float32


def _dot(spec: str, a: jax.Array, b: jax.Array) -> jax.Array:
    """``einsum`` of two arrays in the input dtype, accumulated and returned in float32."""
    return jnp.einsum(spec, a, b, preferred_element_type=_F32)


def _forward(q: jax.Array, k: jax.Array, v: jax.Array, vis: jax.Array, scale: float
             ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """Heads-first ``(out in the dtype, natural lse, P in float32, row sums)``."""
    qs = (q.astype(_F32) * (scale * _LOG2E)).astype(q.dtype)
    s = _dot("bhqd,bhkd->bhqk", qs, k)
    m = jnp.max(jnp.where(vis, s, -jnp.inf), axis=-1, keepdims=True, initial=-jnp.inf)
    m = jnp.where(jnp.isfinite(m), m, 0.0)
    w = jnp.where(vis, jnp.exp2(jnp.where(vis, s, 0.0) - m), 0.0)
    rows = jnp.sum(w, axis=-1, keepdims=True)
    safe = jnp.where(rows > 0, rows, 1.0)
    out = (_dot("bhqk,bhkd->bhqd", w.astype(q.dtype), v) / safe).astype(q.dtype)
    lse = jnp.where(rows > 0, (m + jnp.log2(safe)) * _LN2, -jnp.inf)[..., 0]
    return out, lse, w / safe, rows


@jax.custom_vjp
def _flash(q: jax.Array, k: jax.Array, v: jax.Array, vis: jax.Array, scale: jax.Array
           ) -> tuple[jax.Array, jax.Array]:
    out, lse, _, _ = _forward(q, k, v, vis, scale)
    return out, lse


def _flash_fwd(q: jax.Array, k: jax.Array, v: jax.Array, vis: jax.Array, scale: jax.Array
               ) -> tuple[tuple[jax.Array, jax.Array], tuple[jax.Array, ...]]:
    out, lse, p, _ = _forward(q, k, v, vis, scale)
    return (out, lse), (q, k, v, out, p, scale)


def _flash_bwd(res: tuple[jax.Array, ...], cotangents: tuple[jax.Array, jax.Array]
               ) -> tuple[jax.Array | None, ...]:
    q, k, v, out, p, scale = res
    do = cotangents[0].astype(q.dtype)  # the lse's cotangent is zero: not an output judged
    d = jnp.sum(do.astype(_F32) * out.astype(_F32), axis=-1, keepdims=True)
    dp = _dot("bhqd,bhkd->bhqk", do, v)
    ds = (p * (dp - d)).astype(q.dtype)
    dq = (_dot("bhqk,bhkd->bhqd", ds, k) * scale).astype(q.dtype)
    dk = (_dot("bhqk,bhqd->bhkd", ds, q) * scale).astype(k.dtype)
    dv = _dot("bhqk,bhqd->bhkd", p.astype(q.dtype), do).astype(v.dtype)
    return dq, dk, dv, None, None


_flash.defvjp(_flash_fwd, _flash_bwd)


def flash_attend(q: jax.Array, k: jax.Array, v: jax.Array, vis: jax.Array, scale: float, *,
                 layout: str) -> tuple[jax.Array, jax.Array]:
    """``(out, lse)`` as :func:`~.reference.attend` gives them, computed with the ``flash``
    design's roundings (module docstring) in the inputs' dtype; differentiable in q, k, v
    (GQA: kv heads repeated for their query heads, their gradients summed back)."""
    q, k, v = (heads_first(x, layout) for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    if group > 1:
        k, v = (jnp.repeat(x, group, axis=1) for x in (k, v))
    vis = jnp.broadcast_to(vis, (q.shape[0], q.shape[1], q.shape[2], k.shape[2]))
    out, lse = _flash(q, k, v, vis, jnp.asarray(scale, _F32))
    return heads_first(out, layout), lse
