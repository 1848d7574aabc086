"""Adapter running megablox ``gmm`` (custom VJP: ``gmm`` for dlhs, ``tgmm`` for drhs) on a
backend.

``gmm`` takes ``interpret=`` directly: ``True`` on ``interpret`` (the generic Pallas
interpreter), TPU interpret parameters on ``tpu-interpret``, ``False`` on ``tpu``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.experimental.pallas.ops.tpu.megablox import ops as _ops

from kernel_harness.core.backends import Backend
from kernel_harness.ops.grouped_matmul.cases import GmmCase
from kernel_harness.spec.adapter import TPU_BACKENDS, Adapter, traced_run

#: The default implementation: megablox's differentiable ``gmm`` (ops.gmm).
gmm = _ops.gmm

IMPL_SIGNATURE = (
    "gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset, "
    "existing_out, transpose_rhs, interpret) -> out; lhs: [m, k], rhs: [groups, k, n] "
    "([groups, n, k] with transpose_rhs), group_sizes: int32 [num_groups] (may exceed the "
    "rhs groups when group_offset, an int32 scalar, selects a shard), out: [m, n]; "
    "differentiable with jax.vjp in lhs and rhs"
)

GMM_BACKENDS = TPU_BACKENDS


@functools.lru_cache(maxsize=64)
def _program(impl: Callable[..., Any], key: tuple[Any, ...], interpret: Any) -> Callable:
    """Jitted ``(lhs, rhs, group_sizes, group_offset, do) -> outputs`` for one static case."""
    fields = dict(key)
    out_dtype = jnp.dtype(fields["out_dtype"])
    tiling, transpose = fields["tiling"], fields["transpose_rhs"]
    has_offset = fields["has_offset"]

    def program(lhs, rhs, group_sizes, group_offset, do):
        def f(lhs, rhs):
            return impl(lhs, rhs, group_sizes, out_dtype, tiling,
                        group_offset if has_offset else None, None, transpose, interpret)

        out, vjp = jax.vjp(f, lhs, rhs)
        dlhs, drhs = vjp(do)
        return {"out": out, "dlhs": dlhs, "drhs": drhs}

    # CPU programs (interpreted kernels) run once per case: skip LLVM's backend
    # optimizations, which roughly double compile time.
    options = None if interpret is False else {"xla_backend_optimization_level": 0}
    return jax.jit(program, compiler_options=options)


def traceable(impl: Callable[..., Any] | None, case: GmmCase, backend: Backend
              ) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """``impl``'s jitted program forward and backward as ``f(inputs) -> outputs`` (out, dlhs,
    drhs); ``interpret`` is the backend's (False for ``tpu``: the Mosaic lowering runs)."""
    program = _program(impl or gmm, case.static_key(), backend.pallas_interpret())

    def f(inputs: dict[str, Any]) -> dict[str, Any]:
        # A scalar (the golden store keeps it as shape (1,)); gmm wants an int32 of shape ().
        offset = jnp.asarray(inputs.get("group_offset", 0), jnp.int32).reshape(())
        return program(inputs["lhs"], inputs["rhs"], inputs["group_sizes"], offset,
                       inputs["do"])

    return f


#: How the megablox-gmm family calls its kernel.
ADAPTER = Adapter(kernel=gmm, impl_signature=IMPL_SIGNATURE, run=traced_run(traceable),
                  backends=GMM_BACKENDS)
