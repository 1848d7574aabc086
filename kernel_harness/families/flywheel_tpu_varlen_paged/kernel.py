"""Adapter running flywheel-tpu's ``flash_attn_varlen_func`` over a paged cache: q
``[q_heads, max_tokens, head_dim]`` packed by ``cu_seqlens_q``, the merged cache, the block
table, ``seqused_k`` and ``num_active``; forward only; the library's own interpret mode off
a TPU. ``max_seqlen_q``/``max_seqlen_k`` (static, they only pick tiles) are the padded
token count and a sequence's capacity: true bounds, never the drawn maxima."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax

from kernel_harness.core.backends import Backend
from kernel_harness.families.flywheel_tpu import library
from kernel_harness.records.adapter import Adapter, traced_run

MODULE = "flywheel_tpu.flash_attn_interface"
OPERANDS = ("q", "kv_cache", "cu_seqlens_q", "seqused_k", "block_table", "num_active")

IMPL_SIGNATURE = (
    "varlen_paged(q, kv_cache, cu_seqlens_q, seqused_k, block_table, num_active, *, "
    "max_seqlen_q, max_seqlen_k, softmax_scale, causal, window_size, softcap, block_sizes, "
    "interpret) -> out; q [q_heads, max_tokens, d] bfloat16 (head-major, packed); kv_cache "
    "[pages, 128, 2 * kv_heads, d] (K of kv head h in row 2h, V in 2h + 1); cu_seqlens_q "
    "int32 [batch + 1]; seqused_k int32 [batch]; block_table int32 [batch, pages_per_seq]; "
    "num_active int32 [1]; window_size=(left, -1); out like q (the default: "
    "flash_attn_varlen_func(q, kv_cache, None, cu_seqlens_q, None, ..., block_table=, "
    "seqused_k=, num_active=))")

# Imported with the family (so ``kernel-harness mutate`` binds a mutated copy of the library)
# where flywheel-tpu can be; None where not.
_LOADED = library.load(MODULE)


def varlen_paged(q: jax.Array, kv_cache: jax.Array, cu_seqlens_q: jax.Array,
                 seqused_k: jax.Array, block_table: jax.Array, num_active: jax.Array, *,
                 max_seqlen_q: int, max_seqlen_k: int, **options: Any) -> jax.Array:
    """The default implementation: flywheel-tpu's ``flash_attn_varlen_func`` with a block
    table (v and cu_seqlens_k None)."""
    return library.required(_LOADED, MODULE).flash_attn_varlen_func(
        q, kv_cache, None, cu_seqlens_q, None, max_seqlen_q, max_seqlen_k,
        block_table=block_table, seqused_k=seqused_k, num_active=num_active, **options)


@functools.lru_cache(maxsize=32)
def _program(impl: Callable[..., Any], key: tuple[Any, ...], interpret: bool
             ) -> Callable[..., Any]:
    f = dict(key)
    left = -1 if f["sliding_window"] is None else f["sliding_window"] - 1
    options = dict(max_seqlen_q=f["max_tokens"], max_seqlen_k=f["page_size"] * f["pages_per_seq"],
                   softmax_scale=None if f["default_scale"] else f["sm_scale"],
                   causal=f["causal"], window_size=(left, -1), softcap=f["soft_cap"] or 0.0,
                   block_sizes=f["blocks"], interpret=interpret)

    def program(*operands):
        return {"out": impl(*operands, **options)}

    return jax.jit(program)


def traceable(impl: Callable[..., Any] | None, case: Any, backend: Backend
              ) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """``impl`` (default :func:`varlen_paged`) on the case's arrays, in the library's own
    interpret mode off a TPU."""
    program = _program(impl or varlen_paged, case.static_key(), backend.is_interpreted)
    return lambda x: program(*(x[n] for n in OPERANDS))


#: How the family calls its kernel.
ADAPTER = Adapter(kernel=varlen_paged, impl_signature=IMPL_SIGNATURE,
                  run=traced_run(traceable),
                  backends=library.backends(frozenset({"interpret", "tpu"})))
