"""Independent plain-jnp reference for the SDPA family (float32, HIGHEST precision).

:func:`low_precision_reference` is the same math with the inputs in the case's own dtype
at the backend's default matmul precision, on the backend's device: the yardstick of the
calibrated judge (README "Calibrated bounds").

``logits = scale * q.k^T + bias``; key j is visible to query i iff the mask allows it,
(causal) ``j <= i``, (window (l, r)) ``i - l <= j <= i + r``, ``j < kv_length`` and
``i < q_length``; masked keys get exactly zero weight; padding rows (``i >= q_length``)
and rows that see no key give zeros. GQA: query head n reads kv head ``n // (N / K)``.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from kernel_harness.core.backends import Backend
from kernel_harness.families.sdpa.cases import SdpaCase

_HI = jax.lax.Precision.HIGHEST


def dense_mask(case: SdpaCase, mask, q_lengths, kv_lengths) -> jax.Array:
    """``(batch, heads, q_len, kv_len)`` visibility from the arrays and the description."""
    t = jnp.arange(case.q_len)[:, None]
    s = jnp.arange(case.kv_len)[None, :]
    vis = jnp.ones((case.batch, case.heads, case.q_len, case.kv_len), bool)
    if mask is not None:
        vis = vis & mask
    if case.is_causal:
        vis = vis & (s <= t)
    if case.window is not None:
        left, right = case.window
        vis = vis & (s >= t - left) & (s <= t + right)
    if kv_lengths is not None:
        vis = vis & (s[None, None] < kv_lengths[:, None, None, None])
    if q_lengths is not None:
        vis = vis & (t[None, None] < q_lengths[:, None, None, None])
    return vis


def attention(case: SdpaCase, query, key, value, bias, vis, precision=_HI):
    """Grouped-query softmax attention with exact zeros on masked keys, in the inputs'
    dtype at ``precision`` (the reference: float32 inputs, HIGHEST)."""
    group = case.heads // case.kv_heads
    k = jnp.repeat(key, group, axis=2)  # kv head n // group serves query head n
    v = jnp.repeat(value, group, axis=2)
    logits = jnp.einsum("btnh,bsnh->bnts", query, k, precision=precision) * case.effective_scale
    if bias is not None:
        logits = logits + bias
    row_max = jnp.max(jnp.where(vis, logits, -jnp.inf), axis=-1, keepdims=True)
    row_max = jax.lax.stop_gradient(jnp.where(jnp.isfinite(row_max), row_max, 0.0))
    weights = jnp.where(vis, jnp.exp(jnp.where(vis, logits, 0.0) - row_max), 0.0)
    denom = jnp.sum(weights, axis=-1, keepdims=True)
    probs = weights / jnp.where(denom == 0.0, 1.0, denom)
    return jnp.einsum("bnts,bsnh->btnh", probs, v, precision=precision)


@functools.lru_cache(maxsize=128)
def _program(case: SdpaCase, static_key: tuple[object, ...], precision=_HI):
    del static_key  # the cache key; ``case`` (any case with that key) supplies the values

    def program(query, key, value, bias, mask, q_lengths, kv_lengths, do):
        vis = dense_mask(case, mask, q_lengths, kv_lengths)

        def f(query, key, value, bias):
            return attention(case, query, key, value, bias if case.bias else None, vis,
                             precision)

        out, vjp = jax.vjp(f, query, key, value, bias)
        return (out, *vjp(do))

    return jax.jit(program)


def _key_case(case: SdpaCase) -> SdpaCase:
    """The case with its data-only fields normalized, so the lru cache hits."""
    return dataclasses.replace(case, seed=0, mask_keep=1.0, q_lengths=None, kv_lengths=None,
                               logit_scale=1.0)


def _run(case: SdpaCase, inputs: dict[str, np.ndarray], dtype, device: jax.Device,
         precision) -> dict[str, np.ndarray]:
    x = {k: np.asarray(v, dtype) for k, v in inputs.items()
         if k in ("query", "key", "value", "bias", "do")}
    with jax.default_device(device):
        out, dq, dk, dv, dbias = _program(_key_case(case), case.static_key(), precision)(
            x["query"], x["key"], x["value"], x.get("bias", np.zeros((1, 1, 1, 1), dtype)),
            inputs.get("mask"), inputs.get("q_lengths"), inputs.get("kv_lengths"), x["do"],
        )
    if case.bias is None:
        dbias = np.zeros((1, 1, 1, 1), np.float32)
    return {name: np.asarray(val, np.float32) for name, val in
            (("out", out), ("dq", dq), ("dk", dk), ("dv", dv), ("dbias", dbias))}


def reference(case: SdpaCase, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """out, dq, dk, dv, dbias (zeros (1, 1, 1, 1) without bias), all float32."""
    return _run(case, inputs, np.float32, jax.devices("cpu")[0], _HI)


def low_precision_reference(case: SdpaCase, inputs: dict[str, np.ndarray],
                            backend: Backend) -> dict[str, np.ndarray]:
    """The same outputs computed in ``case.dtype`` at the default matmul precision on
    ``backend``'s device (returned as float32 arrays)."""
    return _run(case, inputs, jnp.dtype(case.dtype), backend.device, None)
