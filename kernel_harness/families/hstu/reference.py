"""The hstu family's reference: the pointwise-attention op
(:mod:`kernel_harness.ops.pointwise_attention`) over the case's dense mask.

Nothing here comes from the kernel package: the dense ``[batch, q_len, kv_len]`` mask is
built from the case description by the attention op's one mask builder, and the op runs
at ``Precision.HIGHEST`` in f32 on the dtype-rounded inputs; gradients are ``jax.vjp``.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from kernel_harness.families.hstu.cases import HstuCase
from kernel_harness.ops.attention.reference import visibility
from kernel_harness.ops.pointwise_attention.reference import pointwise_attention

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
    if kind not in ("causal", "full", "numpy"):
        raise ValueError(f"unknown mask kind {kind!r}")
    segments = None if q_segment_ids is None else (q_segment_ids, kv_segment_ids)
    vis = visibility(q_len, kv_len, causal=kind == "causal",
                     mask=numpy_mask if kind == "numpy" else None,
                     window=None if window is None else (window, window),
                     segments=segments, xp=np)[:, 0]
    return np.array(np.broadcast_to(vis, (batch, q_len, kv_len)))


def case_mask(case: HstuCase, inputs: dict[str, np.ndarray]) -> np.ndarray:
    """:func:`dense_mask` for one case (the numpy mask and segment ids from its inputs)."""
    return dense_mask(
        case.mask, case.q_len, case.kv_len, window=case.window,
        numpy_mask=inputs.get("mask"), q_segment_ids=inputs.get("q_segment_ids"),
        kv_segment_ids=inputs.get("kv_segment_ids"), batch=case.batch,
    )


def attention(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array, scale: float):
    """The pointwise-attention op on ``[B, L, H, D]`` f32 arrays; ``mask`` is
    ``[B, Lq, Lkv]`` bool."""
    return pointwise_attention(q, k, v, mask[:, None, :, :], scale, precision=_HIGHEST)


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
