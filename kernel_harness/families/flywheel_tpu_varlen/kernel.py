"""Adapter running flywheel-tpu's ``flash_attn_varlen_func`` on the attention problem: the
problem's q ``[batch, heads, q_len, d]``, k and v ``[batch, kv_heads, kv_len, d]`` are
packed head-major (``[heads, tokens, d]``), each batch row's valid tokens one sequence in
row order (``cu_seqlens`` from the lengths), then every padding token (query rows past
``q_lengths``, keys past ``kv_lengths``) in the buffer's tail past ``cu_seqlens[-1]``, where
the library promises out 0 and lse -inf and keys nobody attends; out and lse go back to
the tokens they came from. The library's own interpret mode off a TPU."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from kernel_harness.core.backends import Backend
from kernel_harness.families.flywheel_tpu import library
from kernel_harness.families.flywheel_tpu_varlen.cases import FlywheelVarlenCase
from kernel_harness.records.adapter import Adapter, traced_run

MODULE = "flywheel_tpu.flash_attn_interface"

IMPL_SIGNATURE = (
    "flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, "
    "max_seqlen_k, *, softmax_scale, causal, window_size, return_softmax_lse, interpret, "
    "block_sizes) -> (out, lse); q [heads, total_q, d], k/v [kv_heads, total_k, d] "
    "bfloat16, lse [heads, total_q] float32; causal and window_size=(left, right) aligned "
    "bottom-right per sequence"
)

# Imported with the family (so ``kernel-harness mutate`` binds a mutated copy of the library)
# where flywheel-tpu can be; None where not.
_LOADED = library.load(MODULE)


def flash_attn_varlen_func(*args: Any, **kwargs: Any) -> Any:
    """The default implementation: flywheel-tpu's ``flash_attn_varlen_func``."""
    return library.required(_LOADED, MODULE).flash_attn_varlen_func(*args, **kwargs)


def packing(lengths: jax.Array | None, batch: int, length: int
            ) -> tuple[jax.Array, jax.Array]:
    """``(order, cu_seqlens)``: the packed buffer's tokens as indices into the rows'
    ``batch * length`` tokens (each row's first ``lengths[b]`` in row order, then the
    rest), and the int32 sequence offsets ``[0, cumsum(lengths)]``."""
    n = jnp.full((batch,), length, jnp.int32) if lengths is None else lengths.astype(jnp.int32)
    token = jnp.arange(batch * length, dtype=jnp.int32)
    row, pos = token // length, token % length
    order = jnp.argsort(jnp.where(pos < n[row], 0, batch * length) + token, stable=True)
    return order, jnp.concatenate([jnp.zeros((1,), jnp.int32), jnp.cumsum(n, dtype=jnp.int32)])


def packed(x: jax.Array, order: jax.Array) -> jax.Array:
    """``[batch, heads, len, d]`` as ``[heads, batch * len, d]`` in ``order``."""
    return jnp.swapaxes(x, 0, 1).reshape(x.shape[1], -1, x.shape[-1])[:, order]


@functools.lru_cache(maxsize=32)
def _program(impl: Callable[..., Any], case: FlywheelVarlenCase, interpret: bool
             ) -> Callable[..., Any]:
    window = (-1, -1) if case.window is None else case.window
    b, h, t = case.batch, case.q_heads, case.q_len

    def program(x: dict[str, Any]) -> dict[str, Any]:
        q_order, cu_q = packing(x.get("q_lengths"), b, t)
        k_order, cu_k = packing(x.get("kv_lengths"), b, case.kv_len)
        out, lse = impl(packed(x["q"], q_order), packed(x["k"], k_order),
                        packed(x["v"], k_order), cu_q, cu_k, t, case.kv_len,
                        softmax_scale=case.scale, causal=case.is_causal, window_size=window,
                        return_softmax_lse=True, interpret=interpret, block_sizes=case.blocks)
        out = jnp.zeros_like(out).at[:, q_order].set(out)
        lse = jnp.zeros_like(lse).at[:, q_order].set(lse)
        return {"out": jnp.swapaxes(out.reshape(h, b, t, -1), 0, 1),
                "lse": jnp.swapaxes(lse.reshape(h, b, t), 0, 1)}

    return jax.jit(program)


def traceable(impl: Callable[..., Any] | None, case: FlywheelVarlenCase, backend: Backend
              ) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """``impl`` (default :func:`flash_attn_varlen_func`) on the case's arrays packed, out
    and lse unpacked, in the library's own interpret mode off a TPU."""
    # The data fields (seed, logit scale, the lengths' values) are not the program's.
    static = dataclasses.replace(case, seed=0, logit_scale=1.0, **{
        n: None if getattr(case, n) is None else (0,) * case.batch
        for n in ("q_lengths", "kv_lengths")})
    return _program(impl or flash_attn_varlen_func, static, backend.is_interpreted)


#: How the family calls its kernel.
ADAPTER = Adapter(kernel=flash_attn_varlen_func, impl_signature=IMPL_SIGNATURE,
                  run=traced_run(traceable),
                  backends=library.backends(frozenset({"interpret", "tpu"})))
