"""Adapter running tpu-inference's ragged paged attention v3 for head_dim 64
(``tpu_inference.kernels.ragged_paged_attention.v3.kernel_hd64.ragged_paged_attention_hd64``).

Unlike the main v3 kernel this variant does not ask the TPU generation: one pair of block
sizes (kv pages and queries per block) serves every pass, passed from the case. No
``interpret`` switch: the CPU backends run it in TPU interpret mode inside the harness's
interpreter extensions (its cache accesses go through reshaped refs). Without
tpu-inference installed the family has no backend (``kernel-harness list`` says so).
"""

from __future__ import annotations

from typing import Any

from kernel_harness.core import compat
from kernel_harness.families.tpu_inference.modules import KernelModules
from kernel_harness.families.tpu_inference.ragged import vmem_keyword
from kernel_harness.families.tpu_inference_rpa_hd64.cases import RpaHd64Case
from kernel_harness.ops.paged_attention.keywords import (
    block_keywords,
    passes_keywords,
    scale_keywords,
)
from kernel_harness.records.adapter import JittedTpuProgram

IMPL_SIGNATURE = (
    "impl(q, k, v, kv_cache, kv_lens, page_indices, cu_q_lens, distribution, "
    "attention_sink=None, *, sm_scale, sliding_window, soft_cap, chunk_prefill_size, "
    "num_kv_pages_per_block, num_queries_per_block, q_scale, k_scale, v_scale, "
    "vmem_limit_bytes) -> (out, kv_cache); q: [max_tokens, q_heads, 64], k/v: [max_tokens, "
    "kv_heads, 64] (the new tokens), kv_cache: [pages, page_size, kv_heads/packing, "
    "packing, 128] (K in lanes 0-63, V in 64-127), attention_sink: float32 [q_heads]"
)

#: What the kernel needs besides tpu-inference: every pass ends with
#: ``pltpu.reciprocal``, which jax 0.10.2 lacks (AttributeError while tracing).
NEEDS_JAX = "jax >= 0.11 (the kernel calls pltpu.reciprocal, missing on jax 0.10.2)"

_MODULES = KernelModules("ragged_paged_attention.v3.kernel_hd64")
#: Where tpu-inference is installed on a jax with pltpu.reciprocal: the TPU backends.
RPA_HD64_BACKENDS = _MODULES.backends if compat.pallas_tpu_has("reciprocal") else frozenset()


def ragged_paged_attention_hd64(*operands: Any, **options: Any) -> tuple[Any, Any]:
    """The default implementation: the kernel's function, traced by the adapter's jit."""
    module = _MODULES["kernel_hd64"]
    fn = getattr(module.ragged_paged_attention_hd64, "__wrapped__",
                 module.ragged_paged_attention_hd64)
    return fn(*operands, **options)


def operand_names(case: RpaHd64Case) -> tuple[str, ...]:
    """The kernel's positional operands, the sinks last when the case draws them."""
    names = ("q", "k", "v", "kv_cache", "kv_lens", "page_indices", "cu_q_lens",
             "distribution")
    return (*names, "attention_sink") if case.sinks else names


def _options(f: dict[str, Any], interpreted: bool) -> dict[str, Any]:
    return {**passes_keywords(f), **block_keywords(f), **scale_keywords(f),
            **vmem_keyword(interpreted)}


#: The kernel as one jitted program: ``out`` [max_tokens, q_heads, 64] and the updated
#: ``kv_cache``.
PROGRAM = JittedTpuProgram(
    family="tpu-inference-rpa-v3-hd64", kernel=ragged_paged_attention_hd64,
    operands=operand_names, options=_options, outputs=("out", "kv_cache"),
    shapes=lambda case, inputs: [inputs["q"].shape, inputs["kv_cache"].shape],
    extended=True)
traceable = PROGRAM.traceable

#: How the tpu-inference-rpa-v3-hd64 family calls its kernel.
ADAPTER = PROGRAM.adapter(impl_signature=IMPL_SIGNATURE, backends=RPA_HD64_BACKENDS)
