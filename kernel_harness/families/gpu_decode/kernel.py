"""Adapter for the GPU (Triton) decode attention ``gqa`` / ``mqa``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax.numpy as jnp

from kernel_harness.families import gpu_common
from kernel_harness.families.gpu_decode.cases import DecodeCase

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
