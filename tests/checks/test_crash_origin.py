"""A crash inside a jax host callback (how the TPU interpreter runs kernels) is reported as
the callback's own exception with its own frames, not as jax's ``CpuCallback error``."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

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
