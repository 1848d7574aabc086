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
from kernel_harness.ops.softmax.cases import SoftmaxCase
from kernel_harness.records.adapter import Adapter, expect_shape
from kernel_harness.records.claims import Claim

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
    call=claimed_call)


#: How the gpu-softmax family calls its kernel.
ADAPTER = Adapter(kernel=softmax, impl_signature=IMPL_SIGNATURE, run=run,
                   backends=gpu_common.triton_backends(OPS))
