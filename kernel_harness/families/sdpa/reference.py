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

from kernel_harness.families.sdpa.cases import SdpaCase
from kernel_harness.ops.attention.reference import (
    HIGHEST,
    reference_pair,
    softmax_attention,
    visibility,
)

_HI = HIGHEST


def dense_mask(case: SdpaCase, mask, q_lengths, kv_lengths) -> jax.Array:
    """``(batch, heads, q_len, kv_len)`` visibility from the arrays and the description."""
    vis = visibility(case.q_len, case.kv_len, causal=case.is_causal, window=case.window,
                     q_lengths=q_lengths, kv_lengths=kv_lengths, mask=mask)
    return jnp.broadcast_to(vis, (case.batch, case.heads, case.q_len, case.kv_len))


def attention(case: SdpaCase, query, key, value, bias, vis, precision=_HI):
    """Grouped-query softmax attention, bias after scaling (jax.nn's placement)."""
    return softmax_attention(query, key, value, bias, vis, case.effective_scale,
                             layout="bqhd", precision=precision)


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


reference, low_precision_reference = reference_pair(_run)
