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
- ``jax-flash``: jax's TPU Pallas kernel (``jax.experimental.pallas.ops.tpu.
  flash_attention``), which is not FlashAttention's numerics in the forward. Forward: the
  logits ``(q.k + bias) * scale`` in float32 from q and k in the input dtype (q not
  pre-scaled; the bias, if any, added before the scale), the softmax in float32 in base e,
  the probabilities rounded to the input dtype for the P.V product with float32
  accumulation, the output rounded. Where P is rounded follows the kernel's forward path
  (``Definition.kv_block``, its ``block_k``): a forward that takes every key in one step
  (``block_k == kv_len``) rounds the normalised ``P = exp(s - m) / l``; the tiled forward
  is modelled step by step as it runs, ``block_k`` keys at a time (online softmax: masked
  logits lowered by its finite mask value, ``exp(s - m)`` against the running max rounded
  for P.V, the float32 accumulator rescaled and multiplied by ``1/l`` each step; it does
  not skip the causal blocks the kernel skips, whose only effect on a row is a rescale by
  ``l * (1/l)``, 1 within an ulp). Backward: ``P`` recomputed in float32 from the
  forward's max and row sum, ``D = rowsum(dO * O)`` in float32 from the
  rounded output, ``dP = dO.V^T`` in float32, ``dS = scale * P * (dP - D)`` in float32 and
  rounded once to the input dtype: that rounded ``dS`` is the bias gradient (the kernel's
  ``dab``), and ``dQ = dS.K``, ``dK = dS^T.Q`` (no scale after the product), ``dV = P^T.dO``
  (the normalised P rounded), float32 accumulation, each rounded. A soft cap, sinks, a bias
  after the scale and an unnormalized output are not modelled (an error says so).

The float32 reference is exact math whatever the design: a design moves the yardstick of
the calibrated bound, never the answer.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp

from kernel_harness.ops.attention.vocabulary import heads_first

#: The precision designs a kernel may declare (module docstring).
DESIGNS: tuple[str, ...] = ("plain", "flash", "jax-flash")


def unmodelled(design: str, *, bias: bool, bias_before_scale: bool, soft_cap: bool,
               sinks: bool, normalized: bool) -> list[str]:
    """What ``design``'s twin does not model of a kernel with these features, as phrases
    ("it takes sinks"); empty where it models them all (``plain`` models everything). The
    one statement of each design's reach: a declaration (``Features``) and a definition the
    twin runs (:func:`~.program.attention_outputs`) are both checked by it."""
    if design == "plain":
        return []
    out = [what for what, used in (("it takes a soft cap", soft_cap), ("it takes sinks", sinks),
                                   ("its output is unnormalized", not normalized)) if used]
    if design == "flash":
        out += [what for what, used in (("it takes a bias", bias),
                                        ("its bias comes before the scale", bias_before_scale))
                if used]
    elif bias and not bias_before_scale:  # jax-flash: (q.k + bias) * scale
        out.append("its bias comes after the scale")
    return out
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


def _heads_first_grouped(q: jax.Array, k: jax.Array, v: jax.Array, vis: jax.Array,
                         layout: str) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """q, k, v heads-first, the kv heads repeated for their query heads (GQA: their
    gradients sum back through the repeat), and ``vis`` broadcast to ``[b, h, q, k]``."""
    q, k, v = (heads_first(x, layout) for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    if group > 1:
        k, v = (jnp.repeat(x, group, axis=1) for x in (k, v))
    vis = jnp.broadcast_to(vis, (q.shape[0], q.shape[1], q.shape[2], k.shape[2]))
    return q, k, v, vis


def flash_attend(q: jax.Array, k: jax.Array, v: jax.Array, vis: jax.Array, scale: float, *,
                 layout: str) -> tuple[jax.Array, jax.Array]:
    """``(out, lse)`` as :func:`~.reference.attend` gives them, computed with the ``flash``
    design's roundings (module docstring) in the inputs' dtype; differentiable in q, k, v
    (GQA: kv heads repeated for their query heads, their gradients summed back)."""
    q, k, v, vis = _heads_first_grouped(q, k, v, vis, layout)
    out, lse = _flash(q, k, v, vis, jnp.asarray(scale, _F32))
    return heads_first(out, layout), lse


def _online_softmax_pv(q: jax.Array, k: jax.Array, v: jax.Array, bias: jax.Array,
                       vis: jax.Array, scale: jax.Array, block: int
                       ) -> tuple[jax.Array, jax.Array]:
    """``(out in float32, row sums)`` of the kernel's tiled forward: ``block`` keys at a
    time, masked logits pushed down by its finite mask value, the running max, the
    unnormalised ``exp(s - m)`` rounded for P.V, the accumulator rescaled by ``1/l``."""
    mask_value = -0.7 * float(jnp.finfo(_F32).max)
    m = jnp.full((*q.shape[:3], 1), -jnp.inf, _F32)
    rows = jnp.zeros((*q.shape[:3], 1), _F32)
    acc = jnp.zeros((*q.shape[:3], v.shape[-1]), _F32)
    for lo in range(0, k.shape[2], block):
        keys = slice(lo, lo + block)
        s = (_dot("bhqd,bhkd->bhqk", q, k[:, :, keys]) + bias[..., keys].astype(_F32)) * scale
        s = s + jnp.where(vis[..., keys], 0.0, mask_value)
        m_next = jnp.maximum(m, jnp.max(s, axis=-1, keepdims=True))
        p = jnp.exp(s - m_next)
        corr = jnp.exp(m - m_next) * rows
        rows = jnp.sum(p, axis=-1, keepdims=True) + corr
        inv = jnp.where(rows == 0.0, 1.0, 1.0 / rows)
        acc = acc * (corr * inv)
        acc = acc + _dot("bhqk,bhkd->bhqd", p.astype(q.dtype), v[:, :, keys]) * inv
        m = m_next
    return acc, rows


def _jax_flash_forward(q: jax.Array, k: jax.Array, v: jax.Array, bias: jax.Array,
                       vis: jax.Array, scale: jax.Array, kv_block: int | None
                       ) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Heads-first ``(out in the dtype, natural lse, P in float32)`` of the ``jax-flash``
    design (module docstring); ``bias`` full ``[b, h, q, k]`` (zeros where there is none:
    adding 0.0 in float32 is exact)."""
    s = (_dot("bhqd,bhkd->bhqk", q, k) + bias.astype(_F32)) * scale
    m = jnp.max(jnp.where(vis, s, -jnp.inf), axis=-1, keepdims=True, initial=-jnp.inf)
    m = jnp.where(jnp.isfinite(m), m, 0.0)
    w = jnp.where(vis, jnp.exp(jnp.where(vis, s, 0.0) - m), 0.0)
    rows = jnp.sum(w, axis=-1, keepdims=True)
    if kv_block is None or kv_block >= k.shape[2]:
        safe = jnp.where(rows > 0, rows, 1.0)
        out = _dot("bhqk,bhkd->bhqd", (w / safe).astype(q.dtype), v)
    else:
        out, rows = _online_softmax_pv(q, k, v, bias, vis, scale, kv_block)
        safe = jnp.where(rows > 0, rows, 1.0)
    lse = jnp.where(rows > 0, m + jnp.log(safe), -jnp.inf)[..., 0]
    return out.astype(q.dtype), lse, w * (1.0 / safe)


@functools.partial(jax.custom_vjp, nondiff_argnums=(6,))
def _jax_flash(q: jax.Array, k: jax.Array, v: jax.Array, bias: jax.Array, vis: jax.Array,
               scale: jax.Array, kv_block: int | None) -> tuple[jax.Array, jax.Array]:
    out, lse, _ = _jax_flash_forward(q, k, v, bias, vis, scale, kv_block)
    return out, lse


def _jax_flash_fwd(q: jax.Array, k: jax.Array, v: jax.Array, bias: jax.Array, vis: jax.Array,
                   scale: jax.Array, kv_block: int | None
                   ) -> tuple[tuple[jax.Array, jax.Array], tuple[jax.Array, ...]]:
    out, lse, p = _jax_flash_forward(q, k, v, bias, vis, scale, kv_block)
    return (out, lse), (q, k, v, bias, out, p, scale)


def _jax_flash_bwd(kv_block: int | None, res: tuple[jax.Array, ...],
                   cotangents: tuple[jax.Array, jax.Array]) -> tuple[jax.Array | None, ...]:
    del kv_block  # the backward recomputes the normalised P whatever the forward path
    q, k, v, bias, out, p, scale = res
    do = cotangents[0].astype(q.dtype)  # the lse's cotangent is zero: not an output judged
    d = jnp.sum(out.astype(_F32) * do.astype(_F32), axis=-1, keepdims=True)
    dp = _dot("bhqd,bhkd->bhqk", do, v)
    ds = ((dp - d) * p * scale).astype(bias.dtype)
    dq = _dot("bhqk,bhkd->bhqd", ds.astype(k.dtype), k).astype(q.dtype)
    dk = _dot("bhqk,bhqd->bhkd", ds.astype(q.dtype), q).astype(k.dtype)
    dv = _dot("bhqk,bhqd->bhkd", p.astype(do.dtype), do).astype(v.dtype)
    return dq, dk, dv, ds, None, None


_jax_flash.defvjp(_jax_flash_fwd, _jax_flash_bwd)


def jax_flash_attend(q: jax.Array, k: jax.Array, v: jax.Array, vis: jax.Array, scale: float,
                     *, layout: str, bias: jax.Array | None = None, kv_block: int | None = None
                     ) -> tuple[jax.Array, jax.Array]:
    """``(out, lse)`` as :func:`~.reference.attend` gives them with ``bias_before_scale``,
    computed with the ``jax-flash`` design's roundings (module docstring) in the inputs'
    dtype, the forward taking ``kv_block`` keys a step (None: all); differentiable in q, k,
    v and the bias (broadcastable to ``[batch, q_heads, q_len, kv_len]``; its gradient
    summed back over the axes it broadcasts along; GQA: kv heads repeated for their query
    heads)."""
    q, k, v, vis = _heads_first_grouped(q, k, v, vis, layout)
    bias = jnp.zeros(vis.shape, q.dtype) if bias is None else jnp.broadcast_to(bias, vis.shape)
    out, lse = _jax_flash(q, k, v, bias, vis, jnp.asarray(scale, _F32), kv_block)
    return heads_first(out, layout), lse
