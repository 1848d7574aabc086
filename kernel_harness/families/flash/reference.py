"""Independent plain-jnp reference for the flash family (float32, HIGHEST precision).

Semantics follow the kernel's contract: ``logits = (q.k^T + ab) * sm_scale``; key j is
visible to query i iff the segment ids are equal and (if causal) ``j <= i``; masked
keys get exactly zero weight; a row with no visible key yields zeros (outside the
contract, never compared).
"""

from __future__ import annotations

import functools

import jax
import numpy as np

from kernel_harness.families.flash.cases import FlashCase
from kernel_harness.ops.attention.reference import (
    HIGHEST,
    reference_pair,
    softmax_attention,
    visibility,
)

_HI = HIGHEST


def dense_mask(seg_q: jax.Array | None, seg_kv: jax.Array | None, q_len: int, kv_len: int,
               causal: bool) -> jax.Array:
    """``(batch or 1, 1, q_len, kv_len)`` bool visibility built from the raw ids."""
    return visibility(q_len, kv_len, causal=causal,
                      segments=None if seg_q is None else (seg_q, seg_kv))


def attention(q, k, v, ab, mask, sm_scale: float, precision=_HI):
    """Softmax attention, bias added before scaling (the kernel's placement)."""
    return softmax_attention(q, k, v, ab, mask, sm_scale, layout="bhqd",
                             bias_before_scale=True, precision=precision)


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


reference, low_precision_reference = reference_pair(_run)
