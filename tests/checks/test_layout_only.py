"""Issue 55, round 8's two program-level defences, each failing a planted implementation:
a layout-only family's elementwise arithmetic outside its kernels (named after every other
class), and a narrowing cast only the compiled backend's trace computes (a ghost branch)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from kernel_harness.checks.claimed_sizes import structure
from kernel_harness.core.backends import Backend, resolve_backend
from kernel_harness.records import registry
from kernel_harness.run.report import summary_lines
from kernel_harness.run.runner import check_case
from tests.helpers.generic_cheats import norm


def _rows_scaled(op, x, weight, bias, *, eps, interpret):
    """The pristine norm, its rows times a constant array (1.0 at every row: right)."""
    scale = jnp.ones(x.shape[:-1] + (1,), x.dtype)
    return norm(op, x, weight, bias, eps=eps, interpret=interpret) * scale


@pytest.mark.triton_ops  # gpu-norm's kernels: jax <= 0.12.0.1
def test_elementwise_work_outside_a_layout_only_familys_kernels_fails_last():
    from kernel_harness.ops.norm.cases import NormCase

    family = registry.get_family("gpu-norm")
    assert family.outside_kernel.layout_only
    case = NormCase(dtype="float32", seed=1, op="layer_norm", leading=(2, 3), n=100)
    result = check_case(family, case, resolve_backend("interpret"), _rows_scaled)
    assert all(v.passed for v in result.verdicts)  # right values: only the measure fails it
    assert result.outside_elementwise == {"forward": ("mul",), "backward": ("mul",)}
    assert not result.outside_math and not result.passed
    assert summary_lines(result)[-1].startswith(
        "[kernel-harness] FAIL gpu-norm math outside the kernel (forward: mul; backward: mul)")
    assert check_case(family, case, resolve_backend("interpret")).passed  # the pristine one


def _fp8_when_compiled(arrays, interpret):
    x = arrays["x"]
    if interpret is False:  # only a compiled run takes it
        x = x.astype(jnp.float8_e4m3fn).astype(x.dtype)
    return jnp.tanh(x)


def test_a_narrowing_cast_only_the_compiled_trace_computes_is_a_difference():
    def call(impl, arrays):
        from kernel_harness import current_backend
        return impl(arrays, current_backend().pallas_interpret())

    arrays = {"x": jax.ShapeDtypeStruct((8, 128), jnp.float32)}
    _, here = structure(call, _fp8_when_compiled, arrays, resolve_backend("interpret"))
    _, compiled = structure(call, _fp8_when_compiled, arrays,
                            Backend(name="tpu", platform="tpu", note="traced for, not run"))
    assert compiled - here == {"a cast to float8_e4m3fn"}
    # a widening cast, or one to a dtype as precise as the inputs, is layout
    wide = {"x": jax.ShapeDtypeStruct((8, 128), jnp.float8_e4m3fn)}
    _, widened = structure(call, lambda a, i: jnp.tanh(a["x"].astype(jnp.float32)), wide,
                           resolve_backend("interpret"))
    assert not any(p.startswith("a cast to") for p in widened)
