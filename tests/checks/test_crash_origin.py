"""A crash inside a jax host callback (how the TPU interpreter runs kernels) is reported as
the callback's own exception with its own frames, not as jax's ``CpuCallback error``."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

from kernel_harness.core.backends import resolve_backend
from kernel_harness.run.crash import Crash, crash_kind, origin, own_frames


def _host(x):
    return np.zeros(3, np.float32)[[5]]  # the kernel's real bug: an IndexError


def _kernel(x):
    return jax.pure_callback(_host, jax.ShapeDtypeStruct((1,), jnp.float32), x)


def test_callback_error_names_the_wrapped_exception_and_its_frames():
    with pytest.raises(Exception) as info:  # noqa: PT011 - jax's runtime error type varies
        jax.jit(_kernel)(jnp.ones(1)).block_until_ready()
    error = info.value
    assert "CpuCallback error" in str(error)
    found = origin(error)
    assert found.type_name == "IndexError" and "out of bounds" in found.message
    assert own_frames(error)[-1].name == "_host"
    assert crash_kind(error).startswith("IndexError at test_crash_origin.py:")
    report = Crash(family="toy", case=_Case(), backend=resolve_backend("interpret"),
                   impl="m:f", impl_spec=None, adjustments=(), error=error).report()
    assert "IndexError: index 5 is out of bounds" in report.splitlines()[0]
    assert "the exception named above is from the traceback in the jax runtime error" in report
    assert "in _host:" in report


def test_an_ordinary_exception_is_its_own_origin():
    try:
        raise ValueError("plain")
    except ValueError as e:
        assert origin(e).type_name == "ValueError" and origin(e).found == ""


class _Case:
    dtype = "float32"

    def to_json(self) -> str:
        return "{}"


def _oob_kernel(x_ref, i_ref, o_ref):
    o_ref[...] = x_ref[pl.ds(i_ref[0], 8), :]  # reads rows 40..47 of a 16-row buffer


def _reads_out_of_bounds(x, i):
    return pl.pallas_call(_oob_kernel, out_shape=jax.ShapeDtypeStruct((8, 128), x.dtype),
                          interpret=resolve_backend("tpu-interpret").pallas_interpret())(x, i)


def test_tpu_interpreter_error_is_named_at_the_kernels_call_site():
    """The TPU interpreter raises IndexError in its callback thread; jax re-raises a
    runtime error. The report names the IndexError and the kernel's own call site, not
    jax's or the thread pool's frames."""
    with pytest.raises(Exception) as info:  # noqa: PT011 - jax's runtime error type varies
        np.asarray(_reads_out_of_bounds(jnp.ones((16, 128)), jnp.array([40], jnp.int32)))
    error = info.value
    assert type(error).__name__ != "IndexError"  # what jax raises wraps it
    found = origin(error)
    assert found.type_name == "IndexError" and "Out-of-bounds read" in found.message
    frames = own_frames(error)
    assert frames[-1].name == "_reads_out_of_bounds", frames
    assert not any("threading" in f.filename or "/jax/" in f.filename for f in frames)
