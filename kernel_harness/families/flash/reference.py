"""Independent plain-jnp reference for the flash family (float32, HIGHEST precision).

Semantics follow the kernel's contract: ``logits = (q.k^T + ab) * sm_scale``; key j is
visible to query i iff the segment ids are equal and (if causal) ``j <= i``; masked
keys get exactly zero weight; a row with no visible key yields zeros (outside the
contract, never compared).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from kernel_harness.core.backends import Backend
from kernel_harness.families.flash.cases import FlashCase

_HI = jax.lax.Precision.HIGHEST


def dense_mask(seg_q: jax.Array | None, seg_kv: jax.Array | None, q_len: int, kv_len: int,
               causal: bool) -> jax.Array:
    """``(batch or 1, 1, q_len, kv_len)`` bool visibility built from the raw ids."""
    mask = jnp.ones((1, 1, q_len, kv_len), bool)
    if seg_q is not None:
        mask = mask & (seg_q[:, None, :, None] == seg_kv[:, None, None, :])
    if causal:
        rows = jnp.arange(q_len)[:, None]
        cols = jnp.arange(kv_len)[None, :]
        mask = mask & (cols <= rows)[None, None]
    return mask


def attention(q, k, v, ab, mask, sm_scale: float, precision=_HI):
    """Softmax attention with exact zero weight on masked keys, in the inputs' dtype at
    ``precision`` (the reference: float32, HIGHEST)."""
    logits = jnp.einsum("bhqd,bhkd->bhqk", q, k, precision=precision)
    if ab is not None:
        logits = logits + ab
    logits = logits * sm_scale
    row_max = jnp.max(jnp.where(mask, logits, -jnp.inf), axis=-1, keepdims=True)
    row_max = jax.lax.stop_gradient(jnp.where(jnp.isfinite(row_max), row_max, 0.0))
    weights = jnp.where(mask, jnp.exp(jnp.where(mask, logits, 0.0) - row_max), 0.0)
    denom = jnp.sum(weights, axis=-1, keepdims=True)
    probs = weights / jnp.where(denom == 0.0, 1.0, denom)
    return jnp.einsum("bhqk,bhkd->bhqd", probs, v, precision=precision)


@functools.lru_cache(maxsize=64)
def _program(q_len: int, kv_len: int, causal: bool, sm_scale: float, has_bias: bool,
             has_segments: bool, precision=_HI):
    def program(q, k, v, ab, seg_q, seg_kv, do):
        mask = dense_mask(seg_q if has_segments else None, seg_kv, q_len, kv_len, causal)

        def f(q, k, v, ab):
            return attention(q, k, v, ab if has_bias else None, mask, sm_scale, precision)

        out, vjp = jax.vjp(f, q, k, v, ab)
        dq, dk, dv, dab = vjp(do)
        return out, dq, dk, dv, dab

    return jax.jit(program)


def _run(case: FlashCase, inputs: dict[str, np.ndarray], dtype, device: jax.Device,
         precision) -> dict[str, np.ndarray]:
    x = {k: np.asarray(v, dtype) for k, v in inputs.items() if k in ("q", "k", "v", "ab", "do")}
    shape_ab = (case.batch, case.heads, case.q_len, case.kv_len)
    has_segments = "segment_ids_q" in inputs
    ids = (
        (inputs["segment_ids_q"], inputs["segment_ids_kv"]) if has_segments
        else (np.zeros((1, 1), np.int32), np.zeros((1, 1), np.int32))
    )
    program = _program(case.q_len, case.kv_len, case.causal, case.sm_scale, case.bias,
                       has_segments, precision)
    with jax.default_device(device):
        out, dq, dk, dv, dab = program(
            x["q"], x["k"], x["v"], x.get("ab", np.zeros(shape_ab, dtype)),
            ids[0], ids[1], x["do"],
        )
    if not case.bias:
        dab = np.zeros(shape_ab, np.float32)
    return {name: np.asarray(val, np.float32) for name, val in
            (("out", out), ("dq", dq), ("dk", dk), ("dv", dv), ("dab", dab))}


def reference(case: FlashCase, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """out, dq, dk, dv and dab (zeros without bias) on the case's dtype-rounded inputs."""
    return _run(case, inputs, np.float32, jax.devices("cpu")[0], _HI)


def low_precision_reference(case: FlashCase, inputs: dict[str, np.ndarray],
                            backend: Backend) -> dict[str, np.ndarray]:
    """The same outputs computed in ``case.dtype`` at the default matmul precision on
    ``backend``'s device (returned as float32 arrays)."""
    return _run(case, inputs, jnp.dtype(case.dtype), backend.device, None)
