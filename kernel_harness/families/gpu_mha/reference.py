"""Independent reference for gpu-mha: the attention op's dense mask and softmax (float32,
HIGHEST), its lse in log base 2, and the magnitudes of the summed gradient terms."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from kernel_harness.families import gpu_common
from kernel_harness.families.gpu_mha.cases import MhaCase
from kernel_harness.ops.attention.reference import attend, logits, softmax_weights, visibility

_HI = jax.lax.Precision.HIGHEST


def dense_mask(case: MhaCase) -> np.ndarray:
    """bool [batch, q_len, kv_len]: which key each query may see, built from the case by
    the attention op's dense-mask builder (top-left aligned causal, equal segment ids)."""
    seg = case.segment_ids()
    vis = visibility(case.q_len, case.kv_len, causal=case.causal,
                     segments=None if seg is None else (seg, seg), xp=np)[:, 0]
    return np.broadcast_to(vis, (case.batch, case.q_len, case.kv_len))


def attention(q, k, v, mask, sm_scale):
    """The attention op's softmax over [batch, len, heads, dim] arrays; returns (out, lse
    in log base 2, as the kernel's residual)."""
    out, lse = attend(q, k, v, mask[:, None], sm_scale, layout="bqhd", precision=_HI)
    return out, lse / math.log(2.0)


def gradient_magnitudes(q, k, v, mask, do, sm_scale):
    """The size of the terms summed into dq and dk (``dq:magnitude``, ``dk:magnitude``).

    dS = P * (dP - D) cancels: a key that only one query sees (or a query that sees one key)
    has dS = 0 exactly, so its dk (dq) row is 0 in the reference, while a low-precision
    kernel's rounding of D leaves ~eps * |dP| there. Each row is judged against
    sm_scale * sum P (|dP| + |D|) |q| (|k|) instead of its own zero."""
    out, _ = attention(q, k, v, mask, sm_scale)
    weights, denom, _ = softmax_weights(logits(q, k, sm_scale, layout="bqhd", precision=_HI),
                                        mask[:, None])
    p = weights / jnp.where(denom > 0, denom, 1.0)
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
