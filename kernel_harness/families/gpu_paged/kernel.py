"""Adapter for the GPU (Triton) ``paged_attention``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from jax.experimental.pallas.ops.gpu import paged_attention as _paged

from kernel_harness.core.backends import Backend
from kernel_harness.families import gpu_common
from kernel_harness.families.gpu_paged.cases import PagedCase
from kernel_harness.spec.adapter import Adapter

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


NAMES = ("q", "k_pages", "v_pages", "block_tables", "lengths", "k_scales_pages",
         "v_scales_pages")


def run(
    impl: Callable[..., Any], case: PagedCase, inputs: dict[str, np.ndarray], backend: Backend
) -> dict[str, np.ndarray]:
    """Runs ``impl`` on ``backend``."""
    gpu_common.check_backend("gpu-paged", backend)
    a = gpu_common.put({n: inputs.get(n) for n in NAMES}, backend)
    with gpu_common.kernel_context(backend):
        outs = gpu_common.cached_program(impl, case, backend, _build)(*(a[n] for n in NAMES))
    return gpu_common.to_numpy(outs)


#: How the gpu-paged family calls its kernel.
ADAPTER = Adapter(kernel=paged_attention, impl_signature=IMPL_SIGNATURE, run=run,
                   backends=gpu_common.GPU_BACKENDS)
