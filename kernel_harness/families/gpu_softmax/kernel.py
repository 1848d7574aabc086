"""Adapter running the Pallas GPU ``softmax`` kernel (forward only: it has no backward
kernel and no custom VJP) on a backend."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from kernel_harness.core.backends import Backend, current_backend
from kernel_harness.families import gpu_common
from kernel_harness.ops.softmax.cases import SoftmaxCase, softmax_cases
from kernel_harness.records.adapter import Adapter, expect_shape
from kernel_harness.records.claims import Claim, LargeSizes, Span, Tier

#: The Pallas Triton op module the family wraps (jax <= 0.12.0.1: ``gpu_common.triton_op``).
OPS = ("softmax",)
_softmax = gpu_common.triton_op("softmax")


def softmax(x: jax.Array, *, axis: int = -1, interpret: Any = False) -> jax.Array:
    """The default implementation: ``softmax.softmax`` (looked up at call time, so a
    mutated kernel module is the one that runs)."""
    return _softmax.softmax(x, axis=axis, interpret=interpret)


IMPL_SIGNATURE = (
    "softmax(x, *, axis=-1, interpret) -> probabilities like x; x: [*leading, n] "
    "(0-3 leading axes), softmax over the last axis"
)


def _build(impl: Callable[..., Any], case: SoftmaxCase, interpret: Any) -> Callable[..., Any]:
    def fn(x):
        return {"out": impl(x, axis=-1, interpret=interpret)}

    return gpu_common.jit(fn, cpu=interpret is True)


def run(impl: Callable[..., Any], case: SoftmaxCase, inputs: dict[str, np.ndarray],
        backend: Backend) -> dict[str, np.ndarray]:
    """Runs ``impl`` on x [*leading, n]; ``out`` comes back as [rows, n] (a reshape of the
    kernel's result, so one axis layout serves every leading rank)."""
    out = gpu_common.run_program(_build, ("x",), impl, case, inputs, backend)["out"]
    expect_shape("gpu-softmax", out, (*case.leading, case.n))
    return {"out": out.reshape(case.rows, case.n)}


def claimed_call(impl: Callable[..., Any], arrays: dict[str, Any]) -> Any:
    """``impl`` called as :func:`run` calls it, on (abstract) arrays (``Claim.call``)."""
    return impl(arrays["x"], axis=-1, interpret=current_backend().pallas_interpret())


#: The claimed sizes' dtypes, in CLAIM's order (the large examples draw one case of each).
_DTYPES = ("bfloat16", "float32", "float16", "float32", "bfloat16")
#: Row lengths past the drawn ones (at most 1025) and rows past the drawn ones (at most 6).
_LONG, _MANY = 1026, 7


def _spans(*leading: Span, n: Span) -> dict[str, Span]:
    return {"n": n, **{f"leading[{i}]": span for i, span in enumerate(leading)}}


#: Real examples up to the claimed sizes (``large-sizes``): each claimed size's row
#: length in full (a row costs its length once), its rows capped, where interpreting one
#: kernel program per row costs (two leading axes cost most: 4 x 2000 rows of 256 took 95 s).
LARGE = LargeSizes(
    names=("vocabulary, bfloat16", "vocabulary, float32", "vocabulary, float16, 2 leading "
           "axes", "router, many rows", "router, 2 leading axes"),
    cases=lambda i, spans, without: softmax_cases(dtypes=(_DTYPES[i],), sizes=spans),
    uses=lambda i: frozenset({_DTYPES[i]}),
    tiers={
        "ci": Tier(why="every claimed row length in full; rows capped at 2 of the 8 and 64 "
                   "long rows, 2x4 of 2x4, all 16384 router rows, 2x64 of 4x8192 (0.3-2.4 s "
                   "a case; interpreting a program per row is the cost)",
                   spans=(_spans(Span(1, 2), n=Span(_LONG, 262144)),
                          _spans(Span(1, 2), n=Span(_LONG, 32000)),
                          _spans(Span(1, 2), Span(1, 4), n=Span(_LONG, 131072)),
                          _spans(Span(_MANY, 16384), n=Span(8, 8)),
                          _spans(Span(1, 2), Span(_MANY, 64), n=Span(129, 256)))),
        "nightly": Tier(why="every claimed size in full but the last, whose 4x8192 rows "
                        "are capped at 4x512 (its 2-D grid of row programs: ~25 s)",
                        spans=(_spans(Span(1, 8), n=Span(_LONG, 262144)),
                               _spans(Span(1, 64), n=Span(_LONG, 32000)),
                               _spans(Span(1, 2), Span(1, 4), n=Span(_LONG, 131072)),
                               _spans(Span(_MANY, 16384), n=Span(8, 8)),
                               _spans(Span(1, 4), Span(_MANY, 512), n=Span(129, 256)))),
    })


#: The largest sizes the kernel is meant for, traced by ``claimed-sizes``: a language
#: model's vocabulary (few rows of 32k-256k logits: sampling and the loss), and a
#: mixture-of-experts router (one row per token, tens of thousands of them, over 8-256
#: experts: many short rows, where the rows, not the row length, grow).
CLAIM = Claim(
    reason="softmax rows are vocabularies (32k-256k logits a row) or an MoE router's "
    "scores (16k-32k tokens a batch, one row each, over 8 to 256 experts)",
    sizes=lambda: ({"x": jax.ShapeDtypeStruct((8, 262144), jnp.bfloat16)},
                   {"x": jax.ShapeDtypeStruct((64, 32000), jnp.float32)},
                   {"x": jax.ShapeDtypeStruct((2, 4, 131072), jnp.float16)},
                   {"x": jax.ShapeDtypeStruct((16384, 8), jnp.float32)},
                   {"x": jax.ShapeDtypeStruct((4, 8192, 256), jnp.bfloat16)}),
    small=lambda: {"x": jax.ShapeDtypeStruct((2, 3, 100), jnp.float32)},
    call=claimed_call,
    large=LARGE,
    # The vocabularies and expert counts real models use, under the claimed sizes: the
    # wrapper is compared there with the kernel stood in for (a row length no ladder
    # rung lands on exactly); and attention probabilities, [batch, heads, queries, keys]:
    # three leading axes over rows longer than any drawn (round 11 took the exponentials
    # in bfloat16 there only).
    stand_in_sizes=lambda: (
        *({"x": jax.ShapeDtypeStruct((2, n), jnp.bfloat16)}
          for n in (32000, 32768, 50257, 65536, 100352, 128256, 151936, 256000)),
        *({"x": jax.ShapeDtypeStruct((4096, n), jnp.float32)}
          for n in (8, 16, 32, 60, 64, 128, 160, 256)),
        *({"x": jax.ShapeDtypeStruct((1, 8, 16, 4096), dt)}
          for dt in (jnp.float32, jnp.float16))))


#: How the gpu-softmax family calls its kernel.
ADAPTER = Adapter(kernel=softmax, impl_signature=IMPL_SIGNATURE, run=run,
                   backends=gpu_common.triton_backends(OPS))
