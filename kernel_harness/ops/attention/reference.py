"""The attention op's independent dense math.

Visibility is built from the case description by index arithmetic on a dense grid
(:func:`visibility`), never from a kernel's own mask objects; :func:`attend` gives masked
keys exactly zero weight and a row that sees no key zeros. :mod:`.program` runs it for
every family: float32 at ``Precision.HIGHEST`` on the CPU, and its low-precision twin (the
same math in the case's dtype at the backend's default matmul precision on the backend's
device: the yardstick of the calibrated judge, README "Calibrated bounds").
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from kernel_harness.ops.attention.vocabulary import head_axis

HIGHEST = jax.lax.Precision.HIGHEST

#: The op's core, which an attention kernel computes inside its body, forward and backward
#: (``KernelExpectation.forward_computes``/``backward_computes``): the logits and the
#: weighted values are products, the weights exponentials (recomputed by a flash backward).
KERNEL_CORE = {"dot_general": "the logits q.k and the weighted sum p.v (dp, dq, dk, dv "
                              "backward)",
               "exp|exp2": "the softmax's exponentials"}

Outputs = dict[str, np.ndarray]


def visibility(q_len: int, kv_len: int, *, causal: bool = False,
               window: tuple[int | None, int | None] | None = None,
               segments: tuple[Any, Any] | None = None, q_lengths: Any = None,
               kv_lengths: Any = None, kv_starts: Any = None, q_offset: Any = 0,
               chunk: int | None = None, mask: Any = None, xp: Any = jnp) -> Any:
    """``[batch or 1, heads or 1, q_len, kv_len]`` bool: which key each query sees; the
    one dense-mask builder of every attention kernel, by index arithmetic on the grid.

    Query ``i`` sits at position ``i + q_offset`` (0: top-left aligned; ``kv_len - q_len``:
    bottom-right, as a decode step or a prefill chunk appended to a cache; a ``[batch]``
    array: per row). Causal keeps ``j <= position``; ``window=(left, right)`` keeps
    ``position - left <= j <= position + right`` (None: unbounded on that side);
    ``chunk`` keeps ``j // chunk == position // chunk``; ``segments`` (``[batch, q_len]``,
    ``[batch, kv_len]`` ids) keeps equal ids; ``kv_starts``/``kv_lengths`` (``[batch]``)
    keep ``start <= j < length``; ``q_lengths`` keeps ``i < q_length``; ``mask``
    (broadcastable to ``[batch, heads, q_len, kv_len]``) is ANDed in as given.
    ``xp``: ``jnp`` (traceable: the arrays may be tracers) or ``numpy`` (no compile, for
    masks built on the host).
    """
    offset = xp.asarray(q_offset)
    if offset.ndim:
        offset = offset[:, None, None, None]
    t = xp.arange(q_len)[:, None] + offset
    s = xp.arange(kv_len)[None, :]
    vis = xp.ones((1, 1, q_len, kv_len), bool)
    if mask is not None:
        vis = vis & xp.asarray(mask, bool)
    if causal:
        vis = vis & (s <= t)
    if window is not None:
        left, right = window
        if left is not None:
            vis = vis & (s >= t - left)
        if right is not None:
            vis = vis & (s <= t + right)
    if chunk is not None:
        vis = vis & (s // chunk == t // chunk)
    if segments is not None:
        seg_q, seg_kv = segments
        vis = vis & (seg_q[:, None, :, None] == seg_kv[:, None, None, :])
    if kv_lengths is not None:
        vis = vis & (s[None, None] < xp.asarray(kv_lengths)[:, None, None, None])
    if kv_starts is not None:
        vis = vis & (s[None, None] >= xp.asarray(kv_starts)[:, None, None, None])
    if q_lengths is not None:
        i = xp.arange(q_len)[:, None]
        vis = vis & (i[None, None] < xp.asarray(q_lengths)[:, None, None, None])
    return vis


#: Where a kernel divides by the softmax denominator: ``probs`` (the weights, before the
#: product with V), ``output`` (the product, after: flash-style accumulators) or ``none``
#: (an unnormalized output, with the log-sum-exp to normalize it later).
NORMALIZE: tuple[str, ...] = ("probs", "output", "none")


def logits(q: jax.Array, k: jax.Array, scale: float, *, layout: str,
           bias: jax.Array | None = None, bias_before_scale: bool = False,
           soft_cap: float | None = None,
           precision: jax.lax.Precision | None = HIGHEST) -> jax.Array:
    """``[batch, q_heads, q_len, kv_len]`` attention logits: ``scale * q.k^T + bias``
    (``(q.k^T + bias) * scale`` with ``bias_before_scale``), then ``soft_cap`` as
    ``cap * tanh(s / cap)``. GQA: query head ``h`` reads kv head ``h // (q_heads /
    kv_heads)``."""
    axis = head_axis(layout)
    group = q.shape[axis] // k.shape[axis]
    if group > 1:
        k = jnp.repeat(k, group, axis=axis)
    qk = "bhqd,bhkd->bhqk" if layout == "bhqd" else "bqhd,bkhd->bhqk"
    s = jnp.einsum(qk, q, k, precision=precision)
    if bias_before_scale:
        s = (s if bias is None else s + bias) * scale
    else:
        s = s * scale
        if bias is not None:
            s = s + bias
    if soft_cap is not None:
        s = soft_cap * jnp.tanh(s / soft_cap)
    return s


def softmax_weights(s: jax.Array, vis: jax.Array, sinks: jax.Array | None = None
                    ) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(weights, denom, m)`` of logits ``s`` ``[batch, heads, q_len, kv_len]``: the
    unnormalized ``exp(s - m)`` on the keys ``vis`` lets through (exactly 0 elsewhere),
    their sum (plus ``exp(sink - m)`` per head with ``sinks``) and the row maximum ``m``
    (0 for a row that sees nothing), each with a trailing axis of 1 but ``weights``."""
    m = jnp.max(jnp.where(vis, s, -jnp.inf), axis=-1, keepdims=True, initial=-jnp.inf)
    if sinks is not None:
        m = jnp.maximum(m, sinks[None, :, None, None])
    m = jax.lax.stop_gradient(jnp.where(jnp.isfinite(m), m, 0.0))
    weights = jnp.where(vis, jnp.exp(jnp.where(vis, s, 0.0) - m), 0.0)
    denom = jnp.sum(weights, axis=-1, keepdims=True)
    if sinks is not None:
        denom = denom + jnp.exp(sinks[None, :, None, None] - m)
    return weights, denom, m


def attend(q: jax.Array, k: jax.Array, v: jax.Array, vis: jax.Array, scale: float, *,
           layout: str, bias: jax.Array | None = None, bias_before_scale: bool = False,
           soft_cap: float | None = None, sinks: jax.Array | None = None,
           normalize: str = "probs",
           precision: jax.lax.Precision | None = HIGHEST) -> tuple[jax.Array, jax.Array]:
    """Softmax attention, the one math of every attention kernel: ``(out, lse)``.

    :func:`logits` over the keys ``vis`` (``[batch, heads, q_len, kv_len]``,
    broadcastable) lets through; masked keys get exactly zero weight; ``sinks``
    (``[q_heads]``) are one extra logit per head that takes weight but has no value;
    ``normalize`` (:data:`NORMALIZE`) is where the denominator divides. A row that sees
    no key has out 0 and lse -inf (with sinks: the sink's logit). ``lse`` is the natural
    log-sum-exp ``[batch, q_heads, q_len]``; out is in ``layout``, in the inputs' dtype
    at ``precision``.
    """
    if normalize not in NORMALIZE:
        raise ValueError(f"normalize must be one of {NORMALIZE}, got {normalize!r}")
    s = logits(q, k, scale, layout=layout, bias=bias, bias_before_scale=bias_before_scale,
               soft_cap=soft_cap, precision=precision)
    axis = head_axis(layout)
    group = q.shape[axis] // v.shape[axis]
    if group > 1:
        v = jnp.repeat(v, group, axis=axis)
    weights, denom, m = softmax_weights(s, vis, sinks)
    safe = jnp.where(denom > 0, denom, 1.0)
    pv = "bhqk,bhkd->bhqd" if layout == "bhqd" else "bhqk,bkhd->bqhd"
    if normalize == "probs":
        out = jnp.einsum(pv, weights / safe, v, precision=precision)
    else:
        out = jnp.einsum(pv, weights, v, precision=precision)
        if normalize == "output":
            per_row = safe if layout == "bhqd" else jnp.swapaxes(safe, 1, 2)
            out = out / per_row
    lse = jnp.where(denom > 0, m + jnp.log(safe), -jnp.inf)[..., 0]
    return out, lse
