"""Independent plain-jnp reference for gpu-decode: visibility from the case, float32, HIGHEST."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from kernel_harness.families import gpu_common
from kernel_harness.families.gpu_decode.cases import DecodeCase
from kernel_harness.ops.attention.reference import attend, visibility

_HI = jax.lax.Precision.HIGHEST


def visible(case: DecodeCase) -> np.ndarray:
    """bool [batch, kv_len]: key j is visible to row b iff start_b <= j < end_b (the
    attention op's dense-mask builder, one query per row)."""
    start, end = case.bounds()
    return visibility(1, case.kv_len, kv_starts=start, kv_lengths=end, xp=np)[:, 0, 0]


def decode_attention(q, k, v, mask, sm_scale, normalize):
    """One-token attention by the attention op's softmax; q head h reads kv head h // group.
    Returns (out, lse); the denominator divides the output (``normalize="output"``), or
    not at all when ``normalize`` is False: out is then sum_j exp(s_j - m) v_j with m the
    largest visible logit. A row with no visible key gets out = 0 and lse = -inf."""
    out, lse = attend(q[:, None], k, v, mask[:, None, None, :], sm_scale, layout="bqhd",
                      normalize="output" if normalize else "none", precision=_HI)
    return out[:, 0], lse[:, :, 0]


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
