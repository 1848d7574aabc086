"""Adapter running flywheel-tpu's ``flash_attn_with_kvcache`` as a paged single-token
decode: q ``[batch, q_heads, head_dim]`` (one token per row, given to the library as
``[batch, 1, q_heads, head_dim]``), the merged paged cache, ``cache_seqlens`` and the block
table; no new tokens appended; the library's own interpret mode off a TPU. The
implementation returns the output only: the cache the library returns (its kernel's
aliased result, unchanged without an append) holds no attention math, so the declared
core (dot_general, exp|exp2 computed in the kernel) is judged on the output alone."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax

from kernel_harness.core.backends import Backend
from kernel_harness.families.flywheel_tpu import library
from kernel_harness.records.adapter import Adapter, traced_run

MODULE = "flywheel_tpu.flash_attn_interface"

IMPL_SIGNATURE = (
    "decode(q, kv_cache, cache_seqlens, block_table, *, softmax_scale, window_size, "
    "softcap, interpret) -> out; q [batch, q_heads, d] bfloat16 (one token per row); "
    "kv_cache the merged pool [pages, 128, 2 * kv_heads, d] (K of kv head h in row 2h, V "
    "in 2h + 1); cache_seqlens int32 [batch]; block_table int32 [batch, pages_per_seq]; "
    "window_size=(left, -1) aligned bottom-right; out [batch, q_heads, d] bfloat16 (the "
    "default: flash_attn_with_kvcache with q[:, None], its out[:, 0]; the returned cache, "
    "unchanged without an append, is not part of the contract)"
)

# Imported with the family (so ``kernel-harness mutate`` binds a mutated copy of the library)
# where flywheel-tpu can be; None where not.
_LOADED = library.load(MODULE)


def decode(q: jax.Array, kv_cache: jax.Array, cache_seqlens: jax.Array,
           block_table: jax.Array, **options: Any) -> jax.Array:
    """The default implementation: flywheel-tpu's ``flash_attn_with_kvcache`` on one query
    token per row, no append; its output (the cache it returns is left out)."""
    out = library.required(_LOADED, MODULE).flash_attn_with_kvcache(
        q[:, None], kv_cache, None, cache_seqlens=cache_seqlens, block_table=block_table,
        **options)[0]
    return out[:, 0]


@functools.lru_cache(maxsize=32)
def _program(impl: Callable[..., Any], key: tuple[Any, ...], interpret: bool
             ) -> Callable[..., Any]:
    f = dict(key)
    left = -1 if f["window_left"] is None else f["window_left"]
    options = dict(softmax_scale=f["scale"], window_size=(left, -1),
                   softcap=f["soft_cap"] or 0.0, interpret=interpret)

    def program(q, kv_cache, cache_seqlens, block_table):
        return {"out": impl(q, kv_cache, cache_seqlens, block_table, **options)}

    return jax.jit(program)


def traceable(impl: Callable[..., Any] | None, case: Any, backend: Backend
              ) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """``impl`` (default :func:`decode`) on the case's arrays, in the
    library's own interpret mode off a TPU."""
    program = _program(impl or decode, case.static_key(),
                       backend.is_interpreted)

    def f(x: dict[str, Any]) -> dict[str, Any]:
        return program(x["q"], x["kv_cache"], x["cache_seqlens"], x["block_table"])

    return f


#: How the family calls its kernel.
ADAPTER = Adapter(kernel=decode, impl_signature=IMPL_SIGNATURE,
                  run=traced_run(traceable),
                  backends=library.backends(frozenset({"interpret", "tpu"})))
