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


def gradient_magnitudes(q, k, v, mask, do, sm_scale):
    """The size of the terms summed into dq and dk (``dq:magnitude``, ``dk:magnitude``).

    dS = P * (dP - D) cancels: a key that only one query sees (or a query that sees one key)
    has dS = 0 exactly, so its dk (dq) row is 0 in the reference, while a low-precision
    kernel's rounding of D leaves ~eps * |dP| there. Each row is judged against
    sm_scale * sum P (|dP| + |D|) |q| (|k|) instead of its own zero."""
    out, _ = attention(q, k, v, mask, sm_scale)
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k, precision=_HI) * sm_scale
    p = jax.nn.softmax(jnp.where(mask[:, None], s, -jnp.inf), axis=-1)
    dp = jnp.einsum("bqhd,bkhd->bhqk", do, v, precision=_HI)
    d = jnp.einsum("bqhd,bqhd->bhq", do, out, precision=_HI)
    terms = p * (jnp.abs(dp) + jnp.abs(d)[..., None]) * sm_scale
    return {"dq:magnitude": jnp.einsum("bhqk,bkhd->bqhd", terms, jnp.abs(k), precision=_HI),
            "dk:magnitude": jnp.einsum("bhqk,bqhd->bkhd", terms, jnp.abs(q), precision=_HI)}


@functools.lru_cache(maxsize=64)
def _compiled(sm_scale: float, magnitudes: bool):
    def fn(q, k, v, mask, do):
        (out, lse), vjp = jax.vjp(lambda q, k, v: attention(q, k, v, mask, sm_scale), q, k, v)
        dq, dk, dv = vjp((do, jnp.zeros_like(lse)))
        extra = gradient_magnitudes(q, k, v, mask, do, sm_scale) if magnitudes else {}
        return {"out": out, "lse": lse, "dq": dq, "dk": dk, "dv": dv, **extra}

    return gpu_common.jit(fn, cpu=True)


def reference(case: MhaCase, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """out, lse (log base 2, as the kernel's residual), dq, dk, dv in float32 (and the
    magnitudes of dq's and dk's summed terms: :func:`gradient_magnitudes`)."""
    with jax.default_device(jax.devices("cpu")[0]):
        f32 = {k: jnp.asarray(inputs[k], jnp.float32) for k in ("q", "k", "v", "do")}
        # float32 keeps |dq|, |dk| as their scales: its tolerances must still see a float32
        # kernel that rounds to bfloat16 inside; the low-precision tables are the fixed bound
        # of the kernel's designed rounding (P and dS cast to the input dtype), which follows
        # the summed terms, so there the magnitudes are the honest scale.
        outs = _compiled(case.sm_scale, case.dtype != "float32")(
            f32["q"], f32["k"], f32["v"], jnp.asarray(dense_mask(case)), f32["do"]
        )
    return {k: np.asarray(v, np.float32) for k, v in outs.items()}
