"""Plain-jnp reference of HSTU pointwise attention, with its own mask construction.

Nothing here comes from the kernel package: the dense ``[batch, q_len,
kv_len]`` mask is built from the case description with explicit index
arithmetic, and the attention is two einsums at ``Precision.HIGHEST`` in f32
on the dtype-rounded inputs; gradients are ``jax.vjp`` of that function.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from kernel_harness.families.hstu.cases import HstuCase

_HIGHEST = jax.lax.Precision.HIGHEST


def dense_mask(
    kind: str,
    q_len: int,
    kv_len: int,
    *,
    window: int | None = None,
    numpy_mask: np.ndarray | None = None,
    q_segment_ids: np.ndarray | None = None,
    kv_segment_ids: np.ndarray | None = None,
    batch: int = 1,
) -> np.ndarray:
    """The ``[batch, q_len, kv_len]`` bool mask: which key each query sees.

    ``kind`` is ``causal`` (key j <= query i, indices from 0 in both
    sequences whatever their lengths), ``full`` or ``numpy`` (``numpy_mask``);
    a window keeps ``|i - j| <= window``; segment ids keep equal ids.
    """
    rows = np.arange(q_len).reshape(q_len, 1)
    cols = np.arange(kv_len).reshape(1, kv_len)
    if kind == "causal":
        mask = cols <= rows
    elif kind == "full":
        mask = np.ones((q_len, kv_len), bool)
    elif kind == "numpy":
        mask = np.asarray(numpy_mask, bool)
    else:
        raise ValueError(f"unknown mask kind {kind!r}")
    if window is not None:
        mask = mask & (np.abs(rows - cols) <= window)
    mask = np.broadcast_to(mask, (batch, q_len, kv_len))
    if q_segment_ids is not None:
        same = q_segment_ids[:, :, None] == kv_segment_ids[:, None, :]
        mask = mask & same
    return np.array(mask)


def case_mask(case: HstuCase, inputs: dict[str, np.ndarray]) -> np.ndarray:
    """:func:`dense_mask` for one case (the numpy mask and segment ids from its inputs)."""
    return dense_mask(
        case.mask, case.q_len, case.kv_len, window=case.window,
        numpy_mask=inputs.get("mask"), q_segment_ids=inputs.get("q_segment_ids"),
        kv_segment_ids=inputs.get("kv_segment_ids"), batch=case.batch,
    )


def attention(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array, scale: float):
    """``(mask * silu(scale q k^T) / q_len) v`` on ``[B, L, H, D]`` f32 arrays;
    ``mask`` is ``[B, Lq, Lkv]`` bool."""
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k, precision=_HIGHEST) * scale
    pointwise = s * jax.nn.sigmoid(s) / q.shape[1]
    p = jnp.where(mask[:, None, :, :], pointwise, 0.0)
    return jnp.einsum("bhqk,bkhd->bqhd", p, v, precision=_HIGHEST)


@jax.jit
def _forward_and_grads(q, k, v, do, mask, scale):
    out, vjp = jax.vjp(lambda q, k, v: attention(q, k, v, mask, scale), q, k, v)
    dq, dk, dv = vjp(do)
    return {"out": out, "dq": dq, "dk": dk, "dv": dv}


def reference(case: HstuCase, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Reference ``out``, ``dq``, ``dk``, ``dv`` (f32) for one case."""
    scale = case.scale if case.scale is not None else 1.0 / math.sqrt(case.head_dim)
    f32 = {name: jnp.asarray(inputs[name], jnp.float32) for name in ("q", "k", "v", "do")}
    mask = jnp.asarray(case_mask(case, inputs))
    result = _forward_and_grads(f32["q"], f32["k"], f32["v"], f32["do"], mask, scale)
    return {name: np.asarray(x) for name, x in result.items()}
