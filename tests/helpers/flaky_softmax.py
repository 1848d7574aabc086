"""A planted flaky implementation of the gpu-softmax signature: the Pallas kernel's result,
doubled on the first run after :func:`arm` and right on every run after (the FLAKY verdict's
tests, issue 55 item 9).

The flag is read at run time through a host callback, not while tracing: the harness
traces and compiles a program once per configuration and reruns it, so a Python-side
state read at trace time would be fixed into the program. A module imported afresh (a
worker process, a ``kernel-harness repro`` in its own process) starts armed."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from kernel_harness.families.gpu_common import triton_op
from tests.helpers.in_kernel import bits_added

# jax's Pallas Triton ops, looked up as the gpu-* families do: on a jax without them
# (>= 0.12.1) this module still imports (its other impls work) and these raise.
_softmax = triton_op("softmax")

_state = {"armed": True, "runs": 0}


def arm() -> None:
    """The next run of :func:`wrong_once` is wrong again (in-process tests call it first)."""
    _state["armed"] = True
    _state["runs"] = 0


def runs() -> int:
    """How many runs of :func:`wrong_once` read the flag since :func:`arm`."""
    return _state["runs"]


def _doublings() -> np.ndarray:
    _state["runs"] += 1
    wrong, _state["armed"] = _state["armed"], False
    return np.int32(1 if wrong else 0)


def wrong_once(x, *, axis=-1, interpret=False):
    """``softmax.softmax`` times 2 on its first run after :func:`arm`, then right (doubled by
    its exponent bits: gpu-softmax measures floating arithmetic outside its kernel)."""
    out = _softmax.softmax(x, axis=axis, interpret=interpret)
    times = jax.pure_callback(_doublings, jax.ShapeDtypeStruct((), jnp.int32))
    return bits_added(out, times << jnp.finfo(out.dtype).nmant)
