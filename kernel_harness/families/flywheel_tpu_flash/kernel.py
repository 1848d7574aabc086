"""Adapter running flywheel-tpu's ``flash_attn_func`` (``flywheel_tpu.flash_attn_interface``)
forward and its vjp: q ``[batch, heads, q_len, d]``, k and v ``[batch, kv_heads, kv_len,
d]``, bfloat16; ``causal`` aligned bottom-right; its own interpret mode off a TPU (the
library's kernels are Mosaic TPU kernels)."""

from __future__ import annotations

import dataclasses
import functools
import types
from collections.abc import Callable
from typing import Any

import jax

from kernel_harness.core.backends import Backend
from kernel_harness.families.flywheel_tpu import library
from kernel_harness.families.flywheel_tpu_flash.cases import FlywheelFlashCase
from kernel_harness.records.adapter import Adapter, traced_run

MODULE = "flywheel_tpu.flash_attn_interface"

IMPL_SIGNATURE = (
    "flash_attn_func(q, k, v, *, softmax_scale, causal, window_size, interpret) -> out; "
    "q [batch, heads, q_len, d], k/v [batch, kv_heads, kv_len, d] bfloat16; causal and "
    "window_size=(left, right) (-1: unbounded) aligned bottom-right; differentiable in q, k, v"
)

# Imported with the family (so ``kernel-harness mutate`` binds a mutated copy of the library)
# where flywheel-tpu can be; None where not.
_LOADED = library.load(MODULE)


def _module() -> types.ModuleType:
    """flywheel-tpu's interface module; ImportError saying why where it cannot be."""
    return library.required(_LOADED, MODULE)


def flash_attn_func(*args: Any, **kwargs: Any) -> Any:
    """The default implementation: flywheel-tpu's ``flash_attn_func``."""
    return _module().flash_attn_func(*args, **kwargs)


@functools.lru_cache(maxsize=32)
def _program(impl: Callable[..., Any], case: FlywheelFlashCase, interpret: bool
             ) -> Callable[..., Any]:
    window = (-1, -1) if case.window is None else case.window
    call = functools.partial(impl, softmax_scale=case.scale, causal=case.is_causal,
                             window_size=window, interpret=interpret)

    def program(x: dict[str, Any]) -> dict[str, Any]:
        out, vjp = jax.vjp(call, x["q"], x["k"], x["v"])
        dq, dk, dv = vjp(x["do"])
        return {"out": out, "dq": dq, "dk": dk, "dv": dv}

    return jax.jit(program)


def traceable(impl: Callable[..., Any] | None, case: FlywheelFlashCase, backend: Backend
              ) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """``impl`` (default :func:`flash_attn_func`) forward and vjp on the case's arrays, in
    the library's own interpret mode off a TPU."""
    # The data fields (seed, logit scale: only materialize reads them) are not the program's.
    static = dataclasses.replace(case, seed=0, logit_scale=1.0)
    return _program(impl or flash_attn_func, static, backend.is_interpreted)


#: How the family calls its kernel.
ADAPTER = Adapter(kernel=flash_attn_func, impl_signature=IMPL_SIGNATURE,
                  run=traced_run(traceable),
                  backends=library.backends(frozenset({"interpret", "tpu"})))
