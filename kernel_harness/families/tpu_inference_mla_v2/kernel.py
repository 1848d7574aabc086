"""Adapter running tpu-inference's MLA v2 kernel
(``tpu_inference.kernels.mla.v2.kernel.mla_ragged_paged_attention``).

The kernel has no ``interpret`` switch: the CPU backends run it in TPU interpret mode
inside :func:`~kernel_harness.core.compat.interpreter_ext.tpu_interpreter_extensions` (it
reads and writes its cache through reshaped and bitcast refs). Its module imports sympy
(``transpose.py``); without tpu-inference and sympy the family has no backend
(``kernel-harness list`` says what it needs).
"""

from __future__ import annotations

import importlib.util
from typing import Any

import jax.numpy as jnp

from kernel_harness.families.tpu_inference import loader
from kernel_harness.families.tpu_inference.modules import KernelModules
from kernel_harness.families.tpu_inference.ragged import vmem_keyword
from kernel_harness.ops.paged_attention.keywords import block_keywords, passes_keywords
from kernel_harness.records.adapter import JittedTpuProgram

IMPL_SIGNATURE = (
    "impl(ql_nope, q_pe, new_kv_c, new_k_pe, cache_kv, kv_lens, page_indices, cu_q_lens, "
    "distribution, *, sm_scale, sliding_window, soft_cap, chunk_prefill_size, "
    "num_kv_pages_per_block, num_queries_per_block, mixed_q_split, s_dtype, "
    "two_step_flash_attention, p_same_dtype_as_v, vmem_limit_bytes) -> (out, cache_kv); "
    "ql_nope: [q_heads, max_tokens, lkv_dim], q_pe: [max_tokens, q_heads, r_dim], new_kv_c: "
    "[max_tokens, lkv_dim], new_k_pe: [max_tokens, r_dim], cache_kv: [pages, page_size / "
    "packing, packing, lanes(lkv_dim) + lanes(r_dim)]; out: [q_heads, max_tokens, lkv_dim]"
)

#: What the kernel module needs beyond jax.
NEEDS = f"{loader.INSTALL} && pip install sympy"
_MODULES = KernelModules(
    "mla.v2.kernel", missing=f"tpu-inference and sympy are not installed ({NEEDS})",
    available=loader.available() and importlib.util.find_spec("sympy") is not None)


def mla_ragged_paged_attention(*operands: Any, **options: Any) -> tuple[Any, Any]:
    """The default implementation: the kernel module's entry point."""
    return _MODULES["kernel"].mla_ragged_paged_attention(*operands, **options)


def _options(f: dict[str, Any], interpreted: bool) -> dict[str, Any]:
    return {**passes_keywords(f), **block_keywords(f), "mixed_q_split": f["mixed_q_split"],
            "s_dtype": jnp.dtype(f["dtype"]), "two_step_flash_attention": f["two_step"],
            "p_same_dtype_as_v": f["p_like_v"], **vmem_keyword(interpreted)}


#: The kernel as one jitted program: ``out`` [q_heads, max_tokens, lkv_dim] and the
#: updated ``cache_kv``.
PROGRAM = JittedTpuProgram(
    family="tpu-inference-mla-v2", kernel=mla_ragged_paged_attention,
    operands=lambda case: ("ql_nope", "q_pe", "new_kv_c", "new_k_pe", "cache_kv", "kv_lens",
                           "page_indices", "cu_q_lens", "distribution"),
    options=_options, outputs=("out", "cache_kv"),
    shapes=lambda case, inputs: [inputs["ql_nope"].shape, inputs["cache_kv"].shape],
    extended=True)
traceable = PROGRAM.traceable

#: How the tpu-inference-mla-v2 family calls its kernel.
ADAPTER = PROGRAM.adapter(impl_signature=IMPL_SIGNATURE, backends=_MODULES.backends)
