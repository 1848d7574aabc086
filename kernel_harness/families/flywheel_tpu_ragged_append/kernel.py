"""Adapter running flywheel-tpu's ragged cache append
(``flywheel_tpu.pallas.flash_fwd_kvcache_varlen.append_ragged``): the writer its
``flash_attn_with_kvcache`` runs on a paged cache before attending, told the write as the
op says it (packed new tokens by cu_seqlens, cached lengths, a flat page table, the active
sequences' count). TPU interpret mode on both CPU backends, forced by the harness; the
updated cache and its bits are compared exactly, as for flywheel-tpu-kv-cache-write.
"""

from __future__ import annotations

import types

import jax

from kernel_harness.families.flywheel_tpu import library
from kernel_harness.ops.kv_cache_write.record import with_cache_bits
from kernel_harness.records.adapter import TPU_BACKENDS, Adapter, JittedTpuProgram

MODULE = "flywheel_tpu.pallas.flash_fwd_kvcache_varlen"

IMPL_SIGNATURE = (
    "append_ragged(kv_cache, k, v, cu_seqlens_q, cache_seqlens, block_table, num_active, *, "
    "page_size, pages_per_seq, interpret) -> kv_cache; kv_cache: bfloat16 [pages, "
    "page_size, 2 * kv_heads, head_dim] (K of head h in row 2h, V in 2h + 1); k, v: "
    "bfloat16 [rows, kv_heads, head_dim]; cu_seqlens_q: int32 [seqs + 1]; cache_seqlens: "
    "int32 [seqs]; block_table: int32 [seqs * pages_per_seq]; num_active: int32 [1] (the "
    "leading sequences written; the rest ignored)"
)

# Imported with the family (so ``kernel-harness mutate`` binds a mutated copy) where
# flywheel-tpu can be; None where not.
_LOADED = library.load(MODULE)


def _module() -> types.ModuleType:
    """flywheel-tpu's varlen kv-cache module; ImportError saying why where it cannot be
    imported."""
    return library.required(_LOADED, MODULE)


def append_ragged(kv_cache: jax.Array, k: jax.Array, v: jax.Array, cu_seqlens_q: jax.Array,
                  cache_seqlens: jax.Array, block_table: jax.Array, num_active: jax.Array, *,
                  page_size: int, pages_per_seq: int, interpret: bool = False) -> jax.Array:
    """The default implementation: flywheel-tpu's ``append_ragged``."""
    return _module().append_ragged(kv_cache, k, v, cu_seqlens_q, cache_seqlens, block_table,
                                   num_active, page_size=page_size,
                                   pages_per_seq=pages_per_seq, interpret=interpret)


#: The append as one jitted program: the updated ``kv_cache``.
PROGRAM = JittedTpuProgram(
    family="flywheel-tpu-ragged-append", kernel=append_ragged,
    operands=lambda case: ("kv_cache", "k", "v", "all_cu_new_lens", "all_cache_lens",
                           "flat_block_table", "num_active"),
    options=lambda fields, interpreted: {"page_size": fields["page_size"],
                                         "pages_per_seq": fields["pages_per_seq"],
                                         "interpret": False},
    outputs=("kv_cache",), shapes=lambda case, inputs: [inputs["kv_cache"].shape],
    keywords=("page_size", "pages_per_seq", "interpret"))
traceable = PROGRAM.traceable


#: How the family calls its kernel.
ADAPTER = Adapter(kernel=append_ragged, impl_signature=IMPL_SIGNATURE,
                  run=with_cache_bits(PROGRAM.run),
                  backends=library.backends(TPU_BACKENDS))
