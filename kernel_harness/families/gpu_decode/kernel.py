"""Adapter for the GPU (Triton) decode attention ``gqa`` / ``mqa``."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from kernel_harness.core.backends import current_backend
from kernel_harness.families import gpu_common
from kernel_harness.families.gpu_decode.cases import DecodeCase
from kernel_harness.records.claims import Claim

#: The Pallas Triton op module the family wraps (jax <= 0.12.0.1: ``gpu_common.triton_op``).
OPS = ("decode_attention",)
_decode = gpu_common.triton_op("decode_attention")

IMPL_SIGNATURE = (
    "decode(q, k, v, start_idx, kv_seq_len, *, entry, sm_scale, block_h, block_k, k_splits, "
    "num_warps, num_stages, interpret, return_residuals=True, normalize_output) -> "
    "(out, (l, m)); q: [batch, q_heads, head_dim], k/v: [batch, kv_len, kv_heads, head_dim], "
    "start_idx/kv_seq_len: int32 [] or [batch] or None (visible keys: start_idx <= j < "
    "kv_seq_len), l/m: float32 [batch, q_heads] (softmax denominator and max logit); entry is "
    "'gqa' or 'mqa' (which public entry point; an impl may ignore it)"
)


def decode(q, k, v, start_idx, kv_seq_len, *, entry: str = "gqa", **kwargs: Any):
    """The default implementation: ``decode_attention.gqa``, or ``decode_attention.mqa`` on
    the single kv head when ``entry == "mqa"``."""
    if entry == "gqa":
        return _decode.gqa(q, k, v, start_idx, kv_seq_len, **kwargs)
    if entry == "mqa":
        if k.shape[2] != 1:
            raise ValueError(f"entry 'mqa' needs one kv head, got k of shape {k.shape}")
        return _decode.mqa(q, k[:, :, 0], v[:, :, 0], start_idx, kv_seq_len, **kwargs)
    raise ValueError(f"unknown entry {entry!r}; use 'gqa' or 'mqa'")


def _build(impl: Callable[..., Any], case: DecodeCase, interpret: Any) -> Callable[..., Any]:
    kwargs = gpu_common.case_options(
        case, "entry", "sm_scale", "block_h", "block_k", "k_splits", "num_warps", "num_stages",
        "normalize_output", interpret=interpret, return_residuals=True)

    def fn(q, k, v, start_idx, kv_seq_len):
        out, (denom, row_max) = impl(q, k, v, start_idx, kv_seq_len, **kwargs)
        return {"out": out, "lse": row_max + jnp.log(denom)}

    return gpu_common.jit(fn, cpu=interpret is True)


#: How the gpu-decode family calls its kernel: ``lse = m + log(l)`` from its residuals.
ADAPTER = gpu_common.triton_adapter(
    kernel=decode, impl_signature=IMPL_SIGNATURE, build=_build,
    names=("q", "k", "v", "start_idx", "kv_seq_len"), optional=("start_idx", "kv_seq_len"), ops=OPS)


def claimed_call(impl: Callable[..., Any], arrays: dict[str, Any]) -> Any:
    """``impl`` called as :func:`_build` calls it, with the kernel's own defaults for its
    tiling (block_h 16, block_k 256, k_splits 16) on (abstract) arrays (``Claim.call``)."""
    q = arrays["q"]
    return impl(q, arrays["k"], arrays["v"], arrays["start_idx"], arrays["kv_seq_len"],
                entry="gqa", sm_scale=1.0 / math.sqrt(q.shape[-1]), block_h=16, block_k=256,
                k_splits=16, num_warps=None, num_stages=2,
                interpret=current_backend().pallas_interpret(), return_residuals=True,
                normalize_output=True)


def _decode_arrays(batch: int, kv_len: int, q_heads: int, kv_heads: int, head_dim: int,
                   dtype: Any) -> dict[str, jax.ShapeDtypeStruct]:
    bounds = jax.ShapeDtypeStruct((batch,), jnp.int32)
    kv = jax.ShapeDtypeStruct((batch, kv_len, kv_heads, head_dim), dtype)
    return {"q": jax.ShapeDtypeStruct((batch, q_heads, head_dim), dtype), "k": kv, "v": kv,
            "start_idx": bounds, "kv_seq_len": bounds}


def _bounds(name: str, shape: tuple[int, ...], keys: int) -> Any:
    """Each row's visible keys ``start_idx <= j < kv_seq_len``: a start in the first half,
    an end past it (seeded by the cache's length, so both names agree)."""
    starts = np.random.default_rng(keys).integers(0, keys // 2, shape)
    if name == "start_idx":
        return starts
    return np.random.default_rng(keys + 1).integers(starts + 1, keys + 1)


#: The longest caches a decode step reads: a model's context (round 6 of the adversarial
#: set passed a decode that ran XLA, no kernel, past the drawn 512 keys: nothing was claimed).
CLAIM = Claim(
    reason="one decode step over a model's context: 128k cached tokens, 32 query heads over "
    "8 kv heads of 128 (bfloat16), and a batch of 32 over 32k tokens, 8 heads over one kv "
    "head of 64 (float16)",
    sizes=lambda: (_decode_arrays(8, 131072, 32, 8, 128, jnp.bfloat16),
                   _decode_arrays(32, 32768, 8, 1, 64, jnp.float16)),
    small=lambda: _decode_arrays(2, 256, 8, 2, 64, jnp.float32),
    call=claimed_call,
    integers=lambda name, a, arrays, rng: _bounds(name, a.shape, arrays["k"].shape[1]),
    # Under the claimed ones (a 128k cache is too large to hold twice for the wrapper
    # comparison): a batch past the drawn 4 rows over 4k keys, 4 and 8 heads a kv head.
    stand_in_sizes=lambda: (_decode_arrays(8, 4096, 32, 8, 128, jnp.bfloat16),
                            _decode_arrays(32, 2048, 8, 1, 64, jnp.float16)),
    no_ladder="the kernel takes a cache only in its 16 splits of a power of two >= 16 keys "
    "each (it asserts), and query heads only in whole multiples of the kv heads: most sizes "
    "between the small one and a claimed one are no valid call")
