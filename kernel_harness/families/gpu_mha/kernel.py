"""Adapter for the GPU (Triton) flash attention ``mha`` with its fused backward."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
from jax.experimental.pallas.ops.gpu import attention as _attention

from kernel_harness.families import gpu_common
from kernel_harness.families.gpu_mha.cases import MhaCase

#: The default implementation: ``jax.experimental.pallas.ops.gpu.attention.mha``.
mha = _attention.mha
BlockSizes = _attention.BlockSizes

IMPL_SIGNATURE = (
    "mha(q, k, v, segment_ids, *, sm_scale, causal, block_sizes: attention.BlockSizes, "
    "num_warps, num_stages, interpret, return_residuals=False) -> out, or (out, lse) with "
    "return_residuals; q: [batch, q_len, heads, head_dim], k/v: [batch, kv_len, heads, "
    "head_dim], segment_ids: int32 [batch, kv_len] or None, lse: float32 [batch, heads, "
    "q_len] in log base 2; differentiable (jax.vjp) in q, k, v"
)


def block_sizes(case: MhaCase) -> Any:
    """The ``BlockSizes`` the case requests (the kernel clamps them to the lengths)."""
    return BlockSizes(**gpu_common.case_options(
        case, "block_q", "block_k", "block_q_dkv", "block_kv_dkv", "block_q_dq", "block_kv_dq"))


def _build(impl: Callable[..., Any], case: MhaCase, interpret: Any) -> Callable[..., Any]:
    kwargs = gpu_common.case_options(case, "num_warps", "num_stages",
                                     sm_scale=case.effective_scale, causal=case.is_causal,
                                     block_sizes=block_sizes(case), interpret=interpret)

    def fn(q, k, v, segment_ids, do):
        out, vjp = jax.vjp(lambda q, k, v: impl(q, k, v, segment_ids, **kwargs), q, k, v)
        dq, dk, dv = vjp(do)
        # lse is only returned by a non-differentiable call, so it is a second forward.
        _, lse = impl(q, k, v, segment_ids, return_residuals=True, **kwargs)
        return {"out": out, "lse": lse, "dq": dq, "dk": dk, "dv": dv}

    return gpu_common.jit(fn, cpu=interpret is True)


#: How the gpu-mha family calls its kernel: forward and backward (cotangent ``do``).
ADAPTER = gpu_common.triton_adapter(
    kernel=mha, impl_signature=IMPL_SIGNATURE, build=_build,
    names=("q", "k", "v", "segment_ids", "do"), optional=("segment_ids",))
