"""A planted nondeterministic implementation of the gpu-softmax signature: the Pallas
kernel's result 8 ulps up (``1 + 2^-20`` in float32) on every other run (well within the
tolerance, so each
run alone matches the reference; two runs on the same inputs differ bitwise). The run
counter is read through a host callback of a scalar, at run time (a compiled program is
reused across runs)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from kernel_harness.families.gpu_common import triton_op
from tests.helpers.in_kernel import bits_added

# jax's Pallas Triton ops, looked up as the gpu-* families do: on a jax without them
# (>= 0.12.1) this module still imports (its other impls work) and these raise.
_softmax = triton_op("softmax")

_runs = [0]


def _steps() -> np.ndarray:
    _runs[0] += 1
    return np.int32(8 if _runs[0] % 2 else 0)


def every_other_run(x, *, axis=-1, interpret=False):
    """``softmax.softmax``, 8 ulps up (about ``1 + 2^-20`` in float32) on every other run
    (by its bits: gpu-softmax measures floating arithmetic outside its kernel)."""
    out = _softmax.softmax(x, axis=axis, interpret=interpret)
    steps = jax.pure_callback(_steps, jax.ShapeDtypeStruct((), jnp.int32))
    return bits_added(out, steps)
