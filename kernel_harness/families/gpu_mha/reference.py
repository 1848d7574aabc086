"""Independent plain-jnp reference for gpu-mha: dense mask from the case, float32, HIGHEST."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from kernel_harness.families import gpu_common
from kernel_harness.families.gpu_mha.cases import MhaCase

_HI = jax.lax.Precision.HIGHEST


def dense_mask(case: MhaCase) -> np.ndarray:
    """bool [batch, q_len, kv_len]: which key each query may see, built from the case."""
    mask = np.ones((case.batch, case.q_len, case.kv_len), bool)
    if case.causal:
        mask &= np.arange(case.q_len)[:, None] >= np.arange(case.kv_len)[None, :]
    seg = case.segment_ids()
    if seg is not None:
        mask &= seg[:, :, None] == seg[:, None, :]
    return mask


def attention(q, k, v, mask, sm_scale):
    """Softmax attention over [batch, len, heads, dim] arrays; returns (out, lse in log2)."""
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k, precision=_HI) * sm_scale
    s = jnp.where(mask[:, None], s, -jnp.inf)
    lse = jax.nn.logsumexp(s, axis=-1)
    p = jnp.exp(s - lse[..., None])
    out = jnp.einsum("bhqk,bkhd->bqhd", p, v, precision=_HI)
    return out, lse / math.log(2.0)


@functools.lru_cache(maxsize=64)
def _compiled(sm_scale: float):
    def fn(q, k, v, mask, do):
        (out, lse), vjp = jax.vjp(lambda q, k, v: attention(q, k, v, mask, sm_scale), q, k, v)
        dq, dk, dv = vjp((do, jnp.zeros_like(lse)))
        return {"out": out, "lse": lse, "dq": dq, "dk": dk, "dv": dv}

    return gpu_common.jit(fn, cpu=True)


def reference(case: MhaCase, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """out, lse (log base 2, as the kernel's residual), dq, dk, dv in float32."""
    with jax.default_device(jax.devices("cpu")[0]):
        f32 = {k: jnp.asarray(inputs[k], jnp.float32) for k in ("q", "k", "v", "do")}
        outs = _compiled(case.sm_scale)(
            f32["q"], f32["k"], f32["v"], jnp.asarray(dense_mask(case)), f32["do"]
        )
    return {k: np.asarray(v, np.float32) for k, v in outs.items()}
