"""Adapter for the GPU (Triton) ``paged_attention``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernel_harness.families import gpu_common
from kernel_harness.families.gpu_paged.cases import PagedCase

#: The Pallas Triton op module the family wraps (jax <= 0.12.0.1: ``gpu_common.triton_op``).
OPS = ("paged_attention",)
_paged = gpu_common.triton_op("paged_attention")

#: The default implementation: ``jax.experimental.pallas.ops.gpu.paged_attention``.
paged_attention = _paged.paged_attention

IMPL_SIGNATURE = (
    "paged_attention(q, k_pages, v_pages, block_tables, lengths, k_scales_pages, "
    "v_scales_pages, *, block_h, pages_per_compute_block, k_splits, num_warps, num_stages, "
    "interpret, attn_logits_soft_cap) -> out; q: [batch, q_heads, head_dim] (logits are "
    "q.k, unscaled), k/v_pages: [kv_heads, total_pages, page_size, head_dim] (int8 when "
    "scales are given), block_tables: int32 [batch, pages_per_seq], lengths: int32 [batch] "
    "or None, *_scales_pages: float32 [kv_heads, total_pages, page_size] or None"
)



def _build(impl: Callable[..., Any], case: PagedCase, interpret: Any) -> Callable[..., Any]:
    kwargs = gpu_common.case_options(
        case, "block_h", "pages_per_compute_block", "k_splits", "num_warps", "num_stages",
        interpret=interpret, attn_logits_soft_cap=case.soft_cap)

    def fn(q, k_pages, v_pages, block_tables, lengths, k_scales, v_scales):
        return {"out": impl(q, k_pages, v_pages, block_tables, lengths, k_scales, v_scales,
                            **kwargs)}

    return gpu_common.jit(fn, cpu=interpret is True)


#: How the gpu-paged family calls its kernel.
ADAPTER = gpu_common.triton_adapter(
    kernel=paged_attention, impl_signature=IMPL_SIGNATURE, build=_build,
    names=("q", "k_pages", "v_pages", "block_tables", "lengths", "k_scales_pages",
           "v_scales_pages"),
    optional=("lengths", "k_scales_pages", "v_scales_pages"), ops=OPS)
