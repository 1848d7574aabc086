"""Adapter running flywheel-tpu's paged KV-cache writer
(``flywheel_tpu.pallas.kv_cache_write.write_kv_cache_pages``).

The writer is a TPU kernel (DMAs, scalar prefetch, VMEM staging): it runs in TPU interpret
mode on both CPU backends (plain settings on ``interpret``, NaN-filled memory and race
detection on ``tpu-interpret``), called with ``interpret=False`` under forced interpret
mode so the harness's settings, not the library's, apply. Its result is the whole cache;
the adapter adds the cache's bits (:func:`~kernel_harness.ops.kv_cache_write.record.
with_cache_bits`) from it, so every element is compared exactly. Without flywheel-tpu (and on
Python < 3.12) the family has no backend.
"""

from __future__ import annotations

import types

import jax

from kernel_harness.families.flywheel_tpu import library
from kernel_harness.ops.kv_cache_write.record import with_cache_bits
from kernel_harness.records.adapter import TPU_BACKENDS, Adapter, JittedTpuProgram

MODULE = "flywheel_tpu.pallas.kv_cache_write"

IMPL_SIGNATURE = (
    "write_kv_cache_pages(k, v, kv_cache, slices, num_slices, *, interpret) -> kv_cache; "
    "k, v: bfloat16 [rows, kv_heads, head_dim]; kv_cache: bfloat16 [pages, page_size, "
    "2 * kv_heads, head_dim] (K of head h in row 2h, V in 2h + 1); slices: int32 [3, n], "
    "column j < num_slices[0] = (cache_row_start, new_row_start, length) in rows of the "
    "flat [pages * page_size] cache and of k/v, each piece inside one page; num_slices: "
    "int32 [1]"
)


# Imported with the family (so ``kernel-harness mutate`` binds a mutated copy) where
# flywheel-tpu can be; None where not.
_LOADED = library.load(MODULE)


def _module() -> types.ModuleType:
    """flywheel-tpu's writer module; ImportError saying why where it cannot be imported."""
    return library.required(_LOADED, MODULE)


def write_kv_cache_pages(k: jax.Array, v: jax.Array, kv_cache: jax.Array, slices: jax.Array,
                         num_slices: jax.Array, *, interpret: bool = False) -> jax.Array:
    """The default implementation: flywheel-tpu's ``write_kv_cache_pages``."""
    return _module().write_kv_cache_pages(k, v, kv_cache, slices, num_slices,
                                          interpret=interpret)


#: The writer as one jitted program: the updated ``kv_cache``.
PROGRAM = JittedTpuProgram(
    family="flywheel-tpu-kv-cache-write", kernel=write_kv_cache_pages,
    operands=lambda case: ("k", "v", "kv_cache", "slices", "num_slices"),
    options=lambda fields, interpreted: {"interpret": False},
    outputs=("kv_cache",), shapes=lambda case, inputs: [inputs["kv_cache"].shape],
    keywords=("interpret",))
traceable = PROGRAM.traceable


#: How the family calls its kernel.
ADAPTER = Adapter(kernel=write_kv_cache_pages, impl_signature=IMPL_SIGNATURE,
                  run=with_cache_bits(PROGRAM.run),
                  backends=library.backends(TPU_BACKENDS))
