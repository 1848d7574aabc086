"""Adapter running tpu-inference's ragged paged attention v3
(``tpu_inference.kernels.ragged_paged_attention.v3.kernel.ragged_paged_attention``).

The kernel asks ``get_tpu_version()`` which chip it runs on (its block defaults, the
width of its mask arithmetic and where its operands live depend on it); on a CPU the
answer is -1 and the call fails. The TPU generation is part of the case: the default
implementation answers it for the duration of the trace in the kernel module's own
namespace (nothing of jax is patched), under a lock. The kernel has no ``interpret``
switch: the CPU backends run it in TPU interpret mode inside
:func:`~kernel_harness.core.compat.interpreter_ext.tpu_interpreter_extensions` (its
loads, stores and DMAs go through reshaped and bitcast refs). Without tpu-inference
installed the family has no backend (``kernel-harness list`` says it needs it).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from kernel_harness.families.tpu_inference.modules import KernelModules
from kernel_harness.families.tpu_inference.ragged import vmem_keyword
from kernel_harness.ops.paged_attention.keywords import passes_keywords, scale_keywords
from kernel_harness.records.adapter import JittedTpuProgram

IMPL_SIGNATURE = (
    "impl(q, k, v, kv_cache, kv_lens, page_indices, cu_q_lens, distribution, *, "
    "tpu_version, sm_scale, sliding_window, soft_cap, chunk_prefill_size, d_block_sizes, "
    "p_block_sizes, m_block_sizes, q_scale, k_scale, v_scale, vmem_limit_bytes) -> "
    "(out, kv_cache); q: [max_tokens, "
    "q_heads, head_dim], k/v: [max_tokens, kv_heads, head_dim] (the new tokens), kv_cache: "
    "[pages, page_size, 2*kv_heads/packing, packing, head_dim padded to 128], int32 "
    "kv_lens [max_num_seqs], page_indices [max_num_seqs*pages_per_seq], cu_q_lens "
    "[max_num_seqs+1], distribution [3]; tpu_version: the generation to assume"
)

_MODULES = KernelModules("ragged_paged_attention.v3.kernel")
_VERSION_LOCK = threading.RLock()


@contextlib.contextmanager
def _assumed_tpu_version(module: Any, version: int) -> Iterator[None]:
    """``module.get_tpu_version()`` answers ``version`` inside the context."""
    with _VERSION_LOCK:
        saved = module.get_tpu_version
        module.get_tpu_version = lambda: version
        try:
            yield
        finally:
            module.get_tpu_version = saved


def ragged_paged_attention(q, k, v, kv_cache, kv_lens, page_indices, cu_q_lens, distribution,
                           *, tpu_version: int, **options: Any) -> tuple[Any, Any]:
    """The default implementation: the kernel's function (traced here, not through its
    own jit cache, which does not key on the generation) told it runs on ``tpu_version``."""
    module = _MODULES["kernel"]
    fn = getattr(module.ragged_paged_attention, "__wrapped__", module.ragged_paged_attention)
    with _assumed_tpu_version(module, tpu_version):
        return fn(q, k, v, kv_cache, kv_lens, page_indices, cu_q_lens, distribution, **options)


def _options(f: dict[str, Any], interpreted: bool) -> dict[str, Any]:
    return {"tpu_version": f["tpu_version"], **passes_keywords(f),
            "d_block_sizes": f["d_blocks"], "p_block_sizes": f["p_blocks"],
            "m_block_sizes": f["m_blocks"], **scale_keywords(f), **vmem_keyword(interpreted)}


#: The kernel as one jitted program: ``out`` [max_tokens, q_heads, head_dim] and the
#: updated ``kv_cache``.
PROGRAM = JittedTpuProgram(
    family="tpu-inference-rpa-v3", kernel=ragged_paged_attention,
    operands=lambda case: ("q", "k", "v", "kv_cache", "kv_lens", "page_indices",
                           "cu_q_lens", "distribution"),
    options=_options, outputs=("out", "kv_cache"),
    shapes=lambda case, inputs: [inputs["q"].shape, inputs["kv_cache"].shape],
    extended=True)
traceable = PROGRAM.traceable

#: How the tpu-inference-rpa-v3 family calls its kernel.
ADAPTER = PROGRAM.adapter(impl_signature=IMPL_SIGNATURE, backends=_MODULES.backends)
