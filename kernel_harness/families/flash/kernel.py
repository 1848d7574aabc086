"""Adapter running ``flash_attention`` (TPU Pallas) and its vjp on a backend.

The kernel has no ``interpret`` argument, so on the interpret backends the whole
jitted forward+vjp program is traced and executed inside
:meth:`Backend.forcing_interpret`; on ``tpu`` it compiles to Mosaic.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.pallas.ops.tpu import flash_attention as _fa

from kernel_harness.core.backends import Backend
from kernel_harness.families.flash.cases import FlashCase
from kernel_harness.records.adapter import TPU_BACKENDS, Adapter, traced_run

#: The default implementation: the kernel's public entry point.
flash_attention = _fa.flash_attention

IMPL_SIGNATURE = (
    "impl(q, k, v, ab=None, segment_ids=None, *, causal: bool, sm_scale: float, "
    "block_sizes: flash_attention.BlockSizes) -> out; q: (batch, heads, q_len, head_dim), "
    "k/v: (batch, heads, kv_len, head_dim), ab: (batch, heads, q_len, kv_len) or None, "
    "segment_ids: flash_attention.SegmentIds(q=(batch, q_len), kv=(batch, kv_len)) int32 "
    "or None; differentiable with jax.vjp in q, k, v and ab"
)

FLASH_BACKENDS = TPU_BACKENDS


def program_key(case: FlashCase) -> tuple[Any, ...]:
    """The compile-cache key of a case: what the call takes as static arguments (the
    shapes and dtype are the jit's own)."""
    return (case.is_causal, case.effective_scale, case.bias is not None,
            case.q_segments is not None, tuple(sorted(case.block_sizes.items())))


@functools.lru_cache(maxsize=64)
def jitted_program(impl: Callable[..., Any], key: tuple[Any, ...]) -> Callable[..., Any]:
    """Jitted ``(q, k, v, ab, seg_q, seg_kv, do) -> (out, dq, dk, dv, dab)`` for ``impl``."""
    causal, sm_scale, has_bias, has_segments, blocks = key
    block_sizes = _fa.BlockSizes(**dict(blocks))

    def program(q, k, v, ab, seg_q, seg_kv, do):
        segment_ids = _fa.SegmentIds(q=seg_q, kv=seg_kv) if has_segments else None

        def attend(q, k, v, ab):
            return impl(
                q, k, v, ab if has_bias else None, segment_ids,
                causal=causal, sm_scale=sm_scale, block_sizes=block_sizes,
            )

        out, vjp = jax.vjp(attend, q, k, v, ab)
        dq, dk, dv, dab = vjp(do)
        if not has_bias:
            dab = jnp.zeros((q.shape[0], q.shape[1], q.shape[2], k.shape[2]), jnp.float32)
        return out, dq, dk, dv, dab

    return jax.jit(program)


def traceable(impl: Callable[..., Any] | None, case: FlashCase, backend: Backend
              ) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """``impl``'s jitted program as ``f(inputs) -> out, dq, dk, dv, dab``, traced under the
    backend's forced interpret mode (the kernel has no interpret argument; the mode is part
    of jax's jit cache key, so a tpu run never reuses an interpreted program). ``dab`` is
    all zeros on both sides when the case has no bias."""
    program = jitted_program(impl or flash_attention, program_key(case))
    b = case.batch
    zeros_q, zeros_kv = np.zeros((b, case.q_len), np.int32), np.zeros((b, case.kv_len), np.int32)

    def f(inputs: dict[str, Any]) -> dict[str, Any]:
        ab = inputs.get("ab", np.zeros((1,), case.dtype))
        with backend.forcing_interpret():
            out, dq, dk, dv, dab = program(
                inputs["q"], inputs["k"], inputs["v"], ab,
                inputs.get("segment_ids_q", zeros_q), inputs.get("segment_ids_kv", zeros_kv),
                inputs["do"],
            )
        return {"out": out, "dq": dq, "dk": dk, "dv": dv, "dab": dab}

    return f


#: How the flash family calls its kernel.
ADAPTER = Adapter(kernel=flash_attention, impl_signature=IMPL_SIGNATURE,
                  run=traced_run(traceable), backends=FLASH_BACKENDS)
