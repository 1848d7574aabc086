"""A planted nondeterministic implementation of the gpu-softmax signature: the Pallas
kernel's result times ``1 + 2^-20`` on every other run (well within the tolerance, so each
run alone matches the reference; two runs on the same inputs differ bitwise). The run
counter is read through a host callback of a scalar, at run time (a compiled program is
reused across runs)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from kernel_harness.families.gpu_common import triton_op

# jax's Pallas Triton ops, looked up as the gpu-* families do: on a jax without them
# (>= 0.12.1) this module still imports (its other impls work) and these raise.
_softmax = triton_op("softmax")

_runs = [0]


def _factor() -> np.ndarray:
    _runs[0] += 1
    return np.float32(1.0 + 2.0**-20 if _runs[0] % 2 else 1.0)


def every_other_run(x, *, axis=-1, interpret=False):
    """``softmax.softmax``, scaled by ``1 + 2^-20`` on every other run."""
    out = _softmax.softmax(x, axis=axis, interpret=interpret)
    factor = jax.pure_callback(_factor, jax.ShapeDtypeStruct((), jnp.float32))
    return (out.astype(jnp.float32) * factor).astype(out.dtype)
