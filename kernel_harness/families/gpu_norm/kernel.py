"""Adapter running the Pallas GPU ``layer_norm`` / ``rms_norm`` kernels (custom VJPs with
Triton backward kernels for dx and for dweight/dbias) on a backend."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
from jax.experimental.pallas.ops.gpu import layer_norm as _layer_norm
from jax.experimental.pallas.ops.gpu import rms_norm as _rms_norm

from kernel_harness.families import gpu_common
from kernel_harness.ops.norm.cases import NormCase


def norm(op: str, x: jax.Array, weight: jax.Array, bias: jax.Array, *, eps: float,
         interpret: Any) -> jax.Array:
    """The default implementation: ``layer_norm.layer_norm`` or ``rms_norm.rms_norm``
    (looked up at call time, so a mutated kernel module is the one that runs), with the
    Triton backward (``backward_pass_impl='triton'``, the kernels' default)."""
    if op == "layer_norm":
        fn = _layer_norm.layer_norm
    elif op == "rms_norm":
        fn = _rms_norm.rms_norm
    else:
        raise ValueError(f"gpu-norm: unknown op {op!r}; use 'layer_norm' or 'rms_norm'")
    return fn(x, weight, bias, eps=eps, backward_pass_impl="triton", interpret=interpret)


IMPL_SIGNATURE = (
    "norm(op, x, weight, bias, *, eps, interpret) -> out; op: 'layer_norm' | 'rms_norm', "
    "x: [a, b, n], weight/bias: [n] (x's dtype), out like x; differentiable with jax.vjp "
    "in x, weight and bias (dx, dweight, dbias)"
)


def _build(impl: Callable[..., Any], case: NormCase, interpret: Any) -> Callable[..., Any]:
    op, eps = case.op, case.eps

    def fn(x, weight, bias, do):
        def f(x, w, b):
            return impl(op, x, w, b, eps=eps, interpret=interpret)

        out_vjp, vjp = jax.vjp(f, x, weight, bias)
        dx, dweight, dbias = vjp(do)
        # The inference call is a different pallas_call (no mean/rstd outputs) from the
        # custom VJP's forward: both are judged against the reference.
        return {"out": f(x, weight, bias), "out_vjp": out_vjp, "dx": dx,
                "dweight": dweight, "dbias": dbias}

    return gpu_common.jit(fn, cpu=interpret is True)


#: How the gpu-norm family calls its kernel: forward (plain and under vjp) and backward.
ADAPTER = gpu_common.triton_adapter(
    kernel=norm, impl_signature=IMPL_SIGNATURE, build=_build,
    names=("x", "weight", "bias", "do"))
