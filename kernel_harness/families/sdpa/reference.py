"""Independent plain-jnp reference for the SDPA family (float32, HIGHEST precision).

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


def attention(case: SdpaCase, query, key, value, bias, vis):
    """Grouped-query softmax attention in float32 with exact zeros on masked keys."""
    group = case.heads // case.kv_heads
    k = jnp.repeat(key, group, axis=2)  # kv head n // group serves query head n
    v = jnp.repeat(value, group, axis=2)
    logits = jnp.einsum("btnh,bsnh->bnts", query, k, precision=_HI) * case.effective_scale
    if bias is not None:
        logits = logits + bias
    row_max = jnp.max(jnp.where(vis, logits, -jnp.inf), axis=-1, keepdims=True)
    row_max = jax.lax.stop_gradient(jnp.where(jnp.isfinite(row_max), row_max, 0.0))
    weights = jnp.where(vis, jnp.exp(jnp.where(vis, logits, 0.0) - row_max), 0.0)
    denom = jnp.sum(weights, axis=-1, keepdims=True)
    probs = weights / jnp.where(denom == 0.0, 1.0, denom)
    return jnp.einsum("bnts,bsnh->btnh", probs, v, precision=_HI)


@functools.lru_cache(maxsize=128)
def _program(case: SdpaCase, static_key: tuple[object, ...]):
    del static_key  # the cache key; ``case`` (any case with that key) supplies the values

    def program(query, key, value, bias, mask, q_lengths, kv_lengths, do):
        vis = dense_mask(case, mask, q_lengths, kv_lengths)

        def f(query, key, value, bias):
            return attention(case, query, key, value, bias if case.bias else None, vis)

        out, vjp = jax.vjp(f, query, key, value, bias)
        return (out, *vjp(do))

    return jax.jit(program)


def _key_case(case: SdpaCase) -> SdpaCase:
    """The case with its data-only fields normalized, so the lru cache hits."""
    return dataclasses.replace(case, seed=0, mask_keep=1.0, q_lengths=None, kv_lengths=None,
                               logit_scale=1.0)


def reference(case: SdpaCase, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """out, dq, dk, dv, dbias (zeros (1, 1, 1, 1) without bias), all float32."""
    f32 = {k: np.asarray(v, np.float32) for k, v in inputs.items()
           if k in ("query", "key", "value", "bias", "do")}
    with jax.default_device(jax.devices("cpu")[0]):
        out, dq, dk, dv, dbias = _program(_key_case(case), case.static_key())(
            f32["query"], f32["key"], f32["value"],
            f32.get("bias", np.zeros((1, 1, 1, 1), np.float32)),
            inputs.get("mask"), inputs.get("q_lengths"), inputs.get("kv_lengths"), f32["do"],
        )
    if case.bias is None:
        dbias = np.zeros((1, 1, 1, 1), np.float32)
    return {"out": np.asarray(out), "dq": np.asarray(dq), "dk": np.asarray(dk),
            "dv": np.asarray(dv), "dbias": np.asarray(dbias)}
