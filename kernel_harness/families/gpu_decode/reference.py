"""Independent plain-jnp reference for gpu-decode: visibility from the case, float32, HIGHEST."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from kernel_harness.families import gpu_common
from kernel_harness.families.gpu_decode.cases import DecodeCase

_HI = jax.lax.Precision.HIGHEST


def visible(case: DecodeCase) -> np.ndarray:
    """bool [batch, kv_len]: key j is visible to row b iff start_b <= j < end_b."""
    start, end = case.bounds()
    pos = np.arange(case.kv_len)[None, :]
    return (pos >= start[:, None]) & (pos < end[:, None])


def decode_attention(q, k, v, mask, sm_scale, normalize):
    """One-token attention; q head h reads kv head h // group. Returns (out, lse).

    A row with no visible key gets out = 0 and lse = -inf. Unnormalized, out is
    sum_j exp(s_j - m) v_j with m the largest visible logit.
    """
    group = q.shape[1] // k.shape[2]
    k = jnp.repeat(k, group, axis=2)
    v = jnp.repeat(v, group, axis=2)
    s = jnp.einsum("bhd,bshd->bhs", q, k, precision=_HI) * sm_scale
    mask = mask[:, None, :]
    m = jnp.max(jnp.where(mask, s, -jnp.inf), axis=-1, keepdims=True)
    any_visible = jnp.any(mask, axis=-1)
    p = jnp.where(mask, jnp.exp(s - jnp.where(jnp.isfinite(m), m, 0.0)), 0.0)
    denom = jnp.where(any_visible, jnp.sum(p, axis=-1), 1.0)
    out = jnp.einsum("bhs,bshd->bhd", p, v, precision=_HI)
    if normalize:
        out = out / denom[..., None]
    lse = jnp.where(any_visible, m[..., 0] + jnp.log(denom), -jnp.inf)
    return out, lse


@functools.lru_cache(maxsize=64)
def _compiled(sm_scale: float, normalize: bool):
    def fn(q, k, v, mask):
        out, lse = decode_attention(q, k, v, mask, sm_scale, normalize)
        return {"out": out, "lse": lse}

    return gpu_common.jit(fn, cpu=True)


def reference(case: DecodeCase, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """out and lse (natural log) in float32."""
    scale = case.head_dim**-0.5 if case.scale_mode != "prescaled-q" else 1.0
    with jax.default_device(jax.devices("cpu")[0]):
        q, k, v = (jnp.asarray(inputs[n], jnp.float32) for n in ("q", "k", "v"))
        outs = _compiled(scale, case.normalize_output)(q, k, v, jnp.asarray(visible(case)))
    return {n: np.asarray(x, np.float32) for n, x in outs.items()}
