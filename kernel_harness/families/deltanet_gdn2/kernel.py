"""Adapter running deltanet-tpu's ``chunk_gdn2`` (chunked-WY GDN-2: Pallas forward and
backward kernels under a custom VJP) in ``precision="fp32"``, forward and ``jax.vjp``.

deltanet-tpu 0.3.0 needs Python >= 3.12 and pins jax < 0.12; it is installed without its
dependencies (``requirements/kernel-libraries.txt``) and runs on the harness's Python 3.12
stack (jax 0.12.0.1). Where it is not installed (the Python 3.11 stack) the family has no
backend and ``kernel-harness list`` says what to install. The kernel decides interpretation
itself (``interpret=True`` off a TPU: the generic Pallas interpreter on ``interpret``); on
``tpu-interpret`` the harness forces TPU interpret mode (NaN-filled memory, race detection).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from kernel_harness.core.backends import Backend
from kernel_harness.core.case import Arrays
from kernel_harness.families import gpu_common
from kernel_harness.ops.delta_rule.cases import DeltaRuleCase
from kernel_harness.records.adapter import TPU_BACKENDS, Adapter, expect_shape

#: The release the family was written and checked against, and how to install it.
TESTED_VERSION = "0.3.0"
INSTALL = (f"deltanet-tpu {TESTED_VERSION} on Python >= 3.12: pip install --no-deps "
           f"deltanet-tpu=={TESTED_VERSION} (requirements/kernel-libraries.txt; it pins jax "
           "< 0.12, checked here on jax 0.12.0.1)")
#: The kernel's module, imported with the family where installed (so a mutated copy,
#: ``kernel-harness mutate``, is the one the family binds).
MODULE = "deltanet_tpu.gdn2"


def available() -> bool:
    """Whether deltanet-tpu is installed (finds it; imports nothing)."""
    try:
        return importlib.util.find_spec("deltanet_tpu") is not None
    except (ImportError, ValueError):
        return False


gdn2: Any = importlib.import_module(MODULE) if available() else None


def _call(precision: str, q: jax.Array, k: jax.Array, v: jax.Array, g: jax.Array,
          b: jax.Array, w: jax.Array, h0: jax.Array | None, segment_ids: jax.Array,
          chunk_size: int, qk_l2norm: bool) -> tuple[jax.Array, jax.Array]:
    if gdn2 is None:
        raise ImportError(f"deltanet-tpu is not installed: {INSTALL}")
    return gdn2.chunk_gdn2(q, k, v, g, b, w, segment_ids=segment_ids, initial_state=h0,
                           output_final_state=True, chunk_size=chunk_size,
                           precision=precision, qk_l2norm=qk_l2norm)


def chunk_gdn2(q: jax.Array, k: jax.Array, v: jax.Array, g: jax.Array, b: jax.Array,
               w: jax.Array, h0: jax.Array | None, *, segment_ids: jax.Array,
               chunk_size: int, qk_l2norm: bool) -> tuple[jax.Array, jax.Array]:
    """The default implementation: ``deltanet_tpu.chunk_gdn2`` with ``precision="fp32"``,
    the final state returned, ``h0`` as its ``initial_state`` (None: none)."""
    return _call("fp32", q, k, v, g, b, w, h0, segment_ids, chunk_size, qk_l2norm)


def chunk_gdn2_bf16(q: jax.Array, k: jax.Array, v: jax.Array, g: jax.Array, b: jax.Array,
                    w: jax.Array, h0: jax.Array | None, *, segment_ids: jax.Array,
                    chunk_size: int, qk_l2norm: bool) -> tuple[jax.Array, jax.Array]:
    """:func:`chunk_gdn2` in the library's default ``precision="bf16"`` (bfloat16 matmul
    operands and intra-chunk matrices, float32 accumulation and state)."""
    return _call("bf16", q, k, v, g, b, w, h0, segment_ids, chunk_size, qk_l2norm)


IMPL_SIGNATURE = (
    "chunk_gdn2(q, k, v, g, b, w, h0, *, segment_ids, chunk_size, qk_l2norm) -> (out, "
    "final_state); q, k, g, b: [B, L, Hk, K], v, w: [B, L, Hv, V], h0: [B, Hv, K, V] or "
    "None, segment_ids: int32 [B, L]; out [B, L, Hv, V], final_state [B, Hv, K, V] float32; "
    "differentiable with jax.vjp in q, k, v, g, b, w and h0"
)

_DIFF = ("q", "k", "v", "g", "b", "w")


def _build(impl: Callable[..., Any], case: DeltaRuleCase, interpret: Any
           ) -> Callable[..., Any]:
    options = {"chunk_size": case.chunk_size, "qk_l2norm": case.qk_l2norm}
    with_h0 = case.initial_state

    def fn(arrays, segment_ids):
        def f(*xs):
            h0 = xs[6] if with_h0 else None
            return impl(*xs[:6], h0, segment_ids=segment_ids, **options)

        wrt = [arrays[n] for n in _DIFF] + ([arrays["h0"]] if with_h0 else [])
        (out, final), vjp = jax.vjp(f, *wrt)
        grads = vjp((arrays["dout"].astype(out.dtype), arrays["dstate"].astype(final.dtype)))
        named = {"out": out, "final_state": final}
        named.update({f"d{n}": d for n, d in zip((*_DIFF, "h0"), grads, strict=False)})
        # No initial state: dh0 is zeros on both sides, reported not compared.
        named.setdefault("dh0", jnp.zeros_like(arrays["dstate"], jnp.float32))
        return named

    return gpu_common.jit(fn, cpu=interpret is not False)


def run(impl: Callable[..., Any], case: DeltaRuleCase, inputs: Arrays, backend: Backend
        ) -> Arrays:
    """Every output of ``impl`` on ``backend``: out, final_state and the gradients, shape-
    checked, as float32 numpy."""
    program = gpu_common.cached_program(impl, case, backend, _build)
    context = (backend.forcing_interpret() if backend.name == "tpu-interpret"
               else contextlib.nullcontext())
    with context, jax.default_device(backend.device):
        placed = {n: jax.device_put(x, backend.device) for n, x in inputs.items()}
        outputs = jax.block_until_ready(program(placed, jnp.asarray(case.segment_ids())))
    shapes = {"out": inputs["dout"].shape, "final_state": inputs["dstate"].shape,
              "dh0": inputs["dstate"].shape, **{f"d{n}": inputs[n].shape for n in _DIFF}}
    for name, got in outputs.items():
        expect_shape(f"deltanet-tpu-gdn2 ({name})", got, shapes[name])
    return {n: np.asarray(x, np.float32) for n, x in outputs.items()}


#: How the family calls its kernel; no backend where deltanet-tpu is not installed.
ADAPTER = Adapter(kernel=chunk_gdn2, impl_signature=IMPL_SIGNATURE, run=run,
                  backends=TPU_BACKENDS if available() else frozenset())
#: The same for the bf16 family (precision="bf16").
ADAPTER_BF16 = Adapter(kernel=chunk_gdn2_bf16, impl_signature=IMPL_SIGNATURE, run=run,
                       backends=ADAPTER.backends)
