"""The attention op's independent dense reference and its low-precision twin.

Visibility is built from the case description by index arithmetic on a dense grid
(:func:`visibility`), never from a kernel's own mask objects; :func:`softmax_attention`
gives masked keys exactly zero weight and a row that sees no key zeros. The reference
runs in float32 at ``Precision.HIGHEST`` on the CPU; its twin (:func:`reference_pair`)
is the same math in the case's dtype at the backend's default matmul precision on the
backend's device: the yardstick of the calibrated judge (README "Calibrated bounds").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from kernel_harness.core.backends import Backend
from kernel_harness.ops.attention.vocabulary import head_axis

HIGHEST = jax.lax.Precision.HIGHEST

Outputs = dict[str, np.ndarray]


def visibility(q_len: int, kv_len: int, *, causal: bool = False,
               window: tuple[int, int] | None = None, segments: tuple[Any, Any] | None = None,
               q_lengths: Any = None, kv_lengths: Any = None, mask: Any = None) -> jax.Array:
    """``[batch or 1, heads or 1, q_len, kv_len]`` bool: which key each query sees.

    Positions count from 0 in both sequences whatever their lengths (top-left aligned):
    causal keeps ``j <= i``; ``window=(left, right)`` keeps ``i - left <= j <= i + right``;
    ``segments`` (``[batch, q_len]``, ``[batch, kv_len]`` ids) keeps equal ids;
    ``kv_lengths``/``q_lengths`` (``[batch]``) keep ``j < kv_length`` / ``i < q_length``;
    ``mask`` (broadcastable to ``[batch, heads, q_len, kv_len]``) is ANDed in as given.
    Traceable: the arrays may be jax tracers.
    """
    t = jnp.arange(q_len)[:, None]
    s = jnp.arange(kv_len)[None, :]
    vis = jnp.ones((1, 1, q_len, kv_len), bool)
    if mask is not None:
        vis = vis & jnp.asarray(mask, bool)
    if causal:
        vis = vis & (s <= t)
    if window is not None:
        left, right = window
        vis = vis & (s >= t - left) & (s <= t + right)
    if segments is not None:
        seg_q, seg_kv = segments
        vis = vis & (seg_q[:, None, :, None] == seg_kv[:, None, None, :])
    if kv_lengths is not None:
        vis = vis & (s[None, None] < kv_lengths[:, None, None, None])
    if q_lengths is not None:
        vis = vis & (t[None, None] < q_lengths[:, None, None, None])
    return vis


def softmax_attention(q: jax.Array, k: jax.Array, v: jax.Array, bias: jax.Array | None,
                      vis: jax.Array, scale: float, *, layout: str,
                      bias_before_scale: bool = False,
                      precision: jax.lax.Precision | None = HIGHEST) -> jax.Array:
    """Softmax attention with exact zero weight on masked keys, in the inputs' dtype at
    ``precision``; output in ``layout`` (:data:`~.vocabulary.LAYOUTS`).

    ``logits = scale * q.k^T + bias``, or ``(q.k^T + bias) * scale`` with
    ``bias_before_scale``; bias and ``vis`` are ``[batch, heads, q_len, kv_len]``
    (broadcastable). GQA: query head ``h`` reads kv head ``h // (q_heads / kv_heads)``.
    """
    axis = head_axis(layout)
    group = q.shape[axis] // k.shape[axis]
    if group > 1:
        k = jnp.repeat(k, group, axis=axis)
        v = jnp.repeat(v, group, axis=axis)
    qk, pv = (("bhqd,bhkd->bhqk", "bhqk,bhkd->bhqd") if layout == "bhqd"
              else ("bqhd,bkhd->bhqk", "bhqk,bkhd->bqhd"))
    logits = jnp.einsum(qk, q, k, precision=precision)
    if bias_before_scale:
        logits = (logits if bias is None else logits + bias) * scale
    else:
        logits = logits * scale
        if bias is not None:
            logits = logits + bias
    row_max = jnp.max(jnp.where(vis, logits, -jnp.inf), axis=-1, keepdims=True)
    row_max = jax.lax.stop_gradient(jnp.where(jnp.isfinite(row_max), row_max, 0.0))
    weights = jnp.where(vis, jnp.exp(jnp.where(vis, logits, 0.0) - row_max), 0.0)
    denom = jnp.sum(weights, axis=-1, keepdims=True)
    probs = weights / jnp.where(denom == 0.0, 1.0, denom)
    return jnp.einsum(pv, probs, v, precision=precision)


RunIn = Callable[[Any, dict[str, np.ndarray], Any, jax.Device, Any], Outputs]


def reference_pair(run_in: RunIn) -> tuple[Callable[[Any, dict[str, np.ndarray]], Outputs],
                                           Callable[[Any, dict[str, np.ndarray], Backend],
                                                    Outputs]]:
    """``(reference, low_precision_reference)`` from ``run_in(case, inputs, dtype, device,
    precision)``: float32 at HIGHEST on the CPU, and the case's own dtype at the default
    matmul precision on the backend's device (both returned as float32 arrays)."""

    def reference(case: Any, inputs: dict[str, np.ndarray]) -> Outputs:
        """Every checked output from the dtype-rounded inputs, computed in float32 at
        HIGHEST precision on the CPU."""
        return run_in(case, inputs, np.float32, jax.devices("cpu")[0], HIGHEST)

    def low_precision_reference(case: Any, inputs: dict[str, np.ndarray],
                                backend: Backend) -> Outputs:
        """The same outputs computed in ``case.dtype`` at the default matmul precision on
        ``backend``'s device (returned as float32 arrays)."""
        return run_in(case, inputs, jnp.dtype(case.dtype), backend.device, None)

    return reference, low_precision_reference
