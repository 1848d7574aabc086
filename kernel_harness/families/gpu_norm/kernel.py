"""Adapter running the Pallas GPU ``layer_norm`` / ``rms_norm`` kernels (custom VJPs with
Triton backward kernels for dx and for dweight/dbias) on a backend."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from kernel_harness.core.backends import current_backend
from kernel_harness.families import gpu_common
from kernel_harness.ops.norm.cases import NormCase, norm_cases
from kernel_harness.records.claims import Claim, LargeSizes, Span, Tier

#: The Pallas Triton op modules the family wraps (jax <= 0.12.0.1: ``gpu_common.triton_op``).
OPS = ("layer_norm", "rms_norm")
_layer_norm = gpu_common.triton_op("layer_norm")
_rms_norm = gpu_common.triton_op("rms_norm")


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


def claimed_call(impl: Callable[..., Any], arrays: dict[str, Any]) -> Any:
    """Both ops as :func:`_build` calls ``impl`` (forward and its vjp), on (abstract) arrays
    (``Claim.call``)."""
    interpret = current_backend().pallas_interpret()
    outputs = {}
    for op in ("layer_norm", "rms_norm"):
        def f(x, w, b, op=op):
            return impl(op, x, w, b, eps=1e-5, interpret=interpret)

        out, vjp = jax.vjp(f, arrays["x"], arrays["weight"], arrays["bias"])
        outputs[op] = (out, vjp(arrays["do"]))
    return outputs


def _norm_arrays(shape: tuple[int, ...], dtype: Any) -> dict[str, jax.ShapeDtypeStruct]:
    n = shape[-1]
    return {"x": jax.ShapeDtypeStruct(shape, dtype), "weight": jax.ShapeDtypeStruct((n,), dtype),
            "bias": jax.ShapeDtypeStruct((n,), dtype), "do": jax.ShapeDtypeStruct(shape, dtype)}


#: The claimed sizes' dtypes, in CLAIM's order (the large examples draw one case of each).
_DTYPES = ("bfloat16", "float32")
#: Rows past the drawn ones (at most 99: ``LEADING``), row lengths past them (at most 5000).
_ROWS, _WIDE = 100, 5001


#: Real examples up to the claimed sizes (``large-sizes``): rows past the drawn 99 (never a
#: whole number of 128-row tiles at the caps: 300, 1000), the float32 rows at the claimed
#: 16384 features; bfloat16 costs most to interpret (300 rows of 8192 took 25-34 s, float32
#: 2.3 s).
LARGE = LargeSizes(
    names=("hidden size, bfloat16", "hidden size, float32"),
    cases=lambda i, spans, without: norm_cases(dtypes=(_DTYPES[i],), without=without,
                                               sizes=spans),
    uses=lambda i: frozenset({_DTYPES[i], "unaligned-n"} | (
        {"rows-over-4096"} if i == 1 else set())),
    tiers={
        "ci": Tier(why="rows capped at 300 of 4096 and of 2 x 1024 (past the drawn 99, not a whole "
                   "number of 128-row tiles); bfloat16 rows capped at 1024 of 8192 features "
                   "(300 x 8192 bfloat16 takes ~30 s to interpret), float32 rows at the "
                   "claimed 16384",
                   spans=({"a": Span(1, 1), "b": Span(_ROWS, 300), "n": Span(128, 1024)},
                          {"a": Span(1, 1), "b": Span(_ROWS, 300), "n": Span(_WIDE, 16384)})),
        "nightly": Tier(why="bfloat16 capped at 1000 rows of 8192 features (interpreting "
                        "bfloat16 costs ~100 s there), float32 at 2 x 1000 rows of the "
                        "claimed 16384 (of 2 x 1024)",
                        spans=({"a": Span(1, 1), "b": Span(_ROWS, 1000),
                                "n": Span(128, 8192)},
                               {"a": Span(1, 2), "b": Span(_ROWS, 1000),
                                "n": Span(_WIDE, 16384)})),
    })


#: The largest rows the kernels are meant for: a model's hidden size (4k-16k), over a
#: long sequence, traced at those sizes by ``claimed-sizes``.
CLAIM = Claim(
    reason="norm rows are a model's hidden size: 4k-16k, over thousands of tokens",
    sizes=lambda: (_norm_arrays((1, 4096, 8192), jnp.bfloat16),
                   _norm_arrays((2, 1024, 16384), jnp.float32)),
    small=lambda: _norm_arrays((2, 4, 128), jnp.float32),
    call=claimed_call,
    uses=lambda arrays: frozenset({"rows-over-4096"} if arrays["x"].shape[-1] > 4096
                                  else ()),
    large=LARGE)


#: How the gpu-norm family calls its kernel: forward (plain and under vjp) and backward.
ADAPTER = gpu_common.triton_adapter(
    kernel=norm, impl_signature=IMPL_SIGNATURE, build=_build,
    names=("x", "weight", "bias", "do"), ops=OPS)
