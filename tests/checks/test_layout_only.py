"""Issue 55, round 8's two program-level defences, each failing a planted implementation:
a layout-only family's elementwise arithmetic outside its kernels (named after every other
class), and a narrowing cast only the compiled backend's trace computes (a ghost branch)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from kernel_harness import testing
from kernel_harness.checks.size_programs import structure
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


def _rows_chosen(op, x, weight, bias, *, eps, interpret):
    """The pristine norm, or its rows rolled past a million features (never: right)."""
    out = norm(op, x, weight, bias, eps=eps, interpret=interpret)
    col = jax.lax.broadcasted_iota(jnp.int32, out.shape, out.ndim - 1)
    return jnp.where(col < 10**6, out, jnp.roll(out, 1, axis=-1))


def _bits_kept(op, x, weight, bias, *, eps, interpret):
    """The pristine norm through its bits and a no-op rounding (right at every size)."""
    out = norm(op, x, weight, bias, eps=eps, interpret=interpret)
    bits = jax.lax.bitcast_convert_type(out, jnp.int32)
    out = jax.lax.bitcast_convert_type(bits, jnp.float32)
    return jax.lax.reduce_precision(out, exponent_bits=8, mantissa_bits=23)


def _rows_masked(op, x, weight, bias, *, eps, interpret):
    """The pristine norm with a mask to zero that never fires: a mask, not a choice."""
    out = norm(op, x, weight, bias, eps=eps, interpret=interpret)
    col = jax.lax.broadcasted_iota(jnp.int32, out.shape, out.ndim - 1)
    return jnp.where(col < 10**6, out, 0.0)


@pytest.mark.triton_ops  # gpu-norm's kernels: jax <= 0.12.0.1
def test_choosing_between_values_and_moving_bits_are_measured_a_mask_is_not():
    from kernel_harness.ops.norm.cases import NormCase

    family = registry.get_family("gpu-norm")
    case = NormCase(dtype="float32", seed=1, op="rms_norm", leading=(1, 3), n=40)
    chosen = check_case(family, case, resolve_backend("interpret"), _rows_chosen)
    assert chosen.outside_elementwise["forward"] == ("select_n",), chosen.outside_elementwise
    assert not chosen.passed
    bits = check_case(family, case, resolve_backend("interpret"), _bits_kept)
    assert bits.outside_elementwise["forward"] == ("reduce_precision",), \
        bits.outside_elementwise  # bit moves are the planted cheats' own spelling
    masked = check_case(family, case, resolve_backend("interpret"), _rows_masked)
    assert not masked.outside_elementwise and masked.passed


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


def _tail_masked_when_exact(arrays, exact):
    """Honest when interpreted; compiled (``exact`` is the interpret flag passed on under
    another name), the last lane is masked: the same primitives, another program."""
    x = arrays["x"]
    col = jax.lax.broadcasted_iota(jnp.int32, x.shape, x.ndim - 1)
    cut = x.shape[-1] if exact else x.shape[-1] - 1
    return jnp.tanh(jnp.where(col < cut, x, -jnp.inf))


def test_a_program_that_differs_only_when_compiled_is_named_whatever_spells_it():
    from kernel_harness.checks.claimed_sizes import program_difference

    def call(impl, arrays):
        from kernel_harness import current_backend
        return impl(arrays, current_backend().pallas_interpret())

    arrays = {"x": jax.ShapeDtypeStruct((8, 128), jnp.float32)}
    here = resolve_backend("interpret")
    tpu = Backend(name="tpu", platform="tpu", note="traced for, not run")
    assert structure(call, _tail_masked_when_exact, arrays, here) == structure(
        call, _tail_masked_when_exact, arrays, tpu)  # the same kernels and primitives
    differs = program_difference(call, _tail_masked_when_exact, arrays, here, tpu)
    assert differs is not None and "127" in differs, differs
    honest = program_difference(call, lambda a, i: jnp.tanh(a["x"]), arrays, here, tpu)
    assert honest is None


def test_megablox_metadata_over_many_groups_is_not_math_outside():
    """Found by round 9's runs: megablox's wrapper computes per-group tile counts in float
    (five elementwise ops of 56-112 elements over 56 groups); summed, they passed the
    problem's P/64 and the pristine kernel failed as math outside. Judged an equation at a
    time, they are not the answer."""
    from kernel_harness.ops.grouped_matmul.cases import GmmCase

    sizes = (2, 2, 2, 3, 2, 2, 3, 2, 2, 2, 3, 2, 2, 3) * 4
    case = GmmCase(dtype="bfloat16", seed=0, m=128, k=128, n=128, group_sizes=sizes,
                   group_offset=55, local_groups=1, out_dtype="float32",
                   tiling=(128, 1024, 128))
    result = check_case(registry.get_family("megablox-gmm"), case,
                        resolve_backend("interpret"))
    assert not result.outside_elementwise and result.passed, summary_lines(result)[-1]


def test_a_read_of_the_datas_values_is_marked_and_a_choice_by_shape_is_not():
    from kernel_harness.core.compat import kernel_flow
    from kernel_harness.records.outside import MOVES

    def keyed(x):
        shift = (x[0] > 1.5).astype(jnp.int32)
        return jax.lax.dynamic_slice_in_dim(jnp.concatenate([x, x]), shift, x.shape[0])

    def shaped(x):
        return jax.lax.dynamic_slice_in_dim(jnp.concatenate([x, x]), x.shape[0] // 2,
                                            x.shape[0])

    def bits(x):  # no comparison: the shift is the first element's low bit
        shift = jax.lax.bitcast_convert_type(x[0], jnp.int32) & 1
        return jax.lax.dynamic_slice_in_dim(jnp.concatenate([x, x]), shift, x.shape[0])

    def moved(x):  # layout only, a cast between floats included
        return jnp.pad(x.reshape(2, 4).T.astype(jnp.bfloat16), ((0, 1), (0, 0)))[::-1]

    x = jax.ShapeDtypeStruct((8,), jnp.float32)
    for fn, read in ((keyed, {"gt", "convert_element_type", "dynamic_slice"}),
                     (shaped, set()), (bits, {"bitcast_convert_type", "and",
                                              "dynamic_slice"}), (moved, set())):
        found = kernel_flow.value_readers(jax.make_jaxpr(fn)(x), MOVES)
        assert read <= found and bool(found) == bool(read), (fn.__name__, found)

    def segment_keyed(x, ids):  # the integer input's value chooses; x is only moved
        return jnp.where(ids[0] == 7, x[::-1], x)

    ids = jax.ShapeDtypeStruct((8,), jnp.int32)
    program = jax.make_jaxpr(segment_keyed)(x, ids)
    assert kernel_flow.value_readers(program, MOVES) == frozenset()
    assert {"eq", "select_n"} <= kernel_flow.value_readers(program, MOVES, integers=True)


@pytest.mark.triton_ops  # gpu-softmax's kernel: jax <= 0.12.0.1
def test_a_wrapper_choosing_by_the_datas_values_is_math_outside():
    from kernel_harness.testing import HarnessCheckFailed

    with pytest.raises(HarnessCheckFailed, match="math outside the kernel \\(forward: .*"
                                                 "bitcast_convert_type.* reading the data's"):
        testing.check("gpu-softmax", impl="tests.helpers.kernel_body_cheats:rolled_by_its_bits",
                      profile="ci", properties=["matches-reference"], max_examples=2)
