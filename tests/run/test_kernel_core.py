"""The op's core computed inside the kernels (issue 55, item 3): a family declares the
primitives its kernels compute (``KernelExpectation.*_computes``), and the flow through
the traced program (:mod:`kernel_harness.core.compat.kernel_flow`) shows, per output,
whether a kernel computes each into its result on the way there. A copy kernel, or one
computing the core into a scratch buffer it never writes out, fails; the real kernel's
shapes of flow (through scratch, loops, ``pl.when``, ``run_scoped``) pass."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from kernel_harness import cli
from kernel_harness.core.compat import kernel_eval, kernel_flow, kernel_probes
from kernel_harness.records.kernels import KernelExpectation
from kernel_harness.run import kernel_outside

EXP, SUM = frozenset({"exp", "exp2"}), frozenset({"reduce_sum"})


def _reach(kernel, x, after=lambda out, x: out):
    def f(x):
        out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                             interpret=True)(x)
        return after(out, x)

    return kernel_flow.reach(jax.make_jaxpr(f)(x), [EXP, SUM])


def _softmax_kernel(x_ref, o_ref):
    e = jnp.exp(x_ref[...] - jnp.max(x_ref[...], axis=-1, keepdims=True))
    o_ref[...] = e / jnp.sum(e, axis=-1, keepdims=True)


def _copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def _core_into_scratch_only(x_ref, o_ref):
    def body(s_ref):
        s_ref[...] = jnp.exp(x_ref[...])  # computed, never written out
        o_ref[...] = x_ref[...]

    pl.run_scoped(body, pltpu.VMEM(x_ref.shape, jnp.float32))


def _core_through_scratch(x_ref, o_ref):
    def body(s_ref):
        s_ref[...] = jnp.exp(x_ref[...])
        o_ref[...] = s_ref[...]

    pl.run_scoped(body, pltpu.VMEM(x_ref.shape, jnp.float32))


def _sum_in_a_loop_under_when(x_ref, o_ref):
    o_ref[...] = x_ref[...]

    @pl.when(x_ref[0, 0] > 0)
    def _():
        o_ref[...] += jax.lax.fori_loop(0, 3, lambda i, a: a + jnp.sum(x_ref[...]), 0.0)


X = jnp.ones((8, 128), jnp.float32)


@pytest.mark.parametrize("kernel, arg, after, expected", [
    pytest.param(_softmax_kernel, X, None, (True, (True, True)), id="the-real-kernel"),
    pytest.param(_copy_kernel, jax.nn.softmax(X), None, (True, (False, False)),
                 id="a-copy-of-xla"),
    pytest.param(_core_into_scratch_only, X, None, (True, (False, False)),
                 id="core-into-scratch-only"),
    pytest.param(_core_through_scratch, X, None, (True, (True, False)),
                 id="core-through-scratch"),
    pytest.param(_sum_in_a_loop_under_when, X, None, (True, (False, True)),
                 id="sum-in-a-loop-under-when"),
    pytest.param(_softmax_kernel, X, lambda out, x: jax.nn.softmax(x), (False, (False, False)),
                 id="result-thrown-away"),
])
def test_what_reaches_the_output(kernel, arg, after, expected):
    got = _reach(kernel, arg, after or (lambda out, x: out))
    assert got == [expected]


def test_the_missing_core_is_named_per_group_for_outputs_a_kernel_reaches():
    jaxpr = jax.make_jaxpr(lambda x: pl.pallas_call(
        _core_through_scratch, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        interpret=True)(x))(X)
    assert kernel_outside.core_missing(jaxpr, ["exp|exp2", "reduce_sum"], ["result"]) == (
        "reduce_sum in no kernel",)
    assert kernel_outside.core_missing(jaxpr, ["exp|exp2"], ["result"]) == ()
    assert kernel_outside.core_missing(jaxpr, ["reduce_sum"], [""]) == ()  # never judged


def test_a_declaration_needs_names_and_reasons():
    with pytest.raises(ValueError, match="needs its reason"):
        KernelExpectation(forward_computes={"exp": " "})
    with pytest.raises(ValueError, match="joined by"):
        KernelExpectation(forward_computes={"exp||exp2": "why"})
    kept = KernelExpectation(forward=1, forward_computes={"exp|exp2": "the exponentials"})
    assert hash(kept) == hash(KernelExpectation(forward_computes={"exp|exp2":
                                                                  "the exponentials"}))
    assert kept.computes_lines() == ["forward: exp|exp2 (the exponentials)"]


def test_describe_prints_what_the_kernels_compute(capsys):
    assert cli.main(["describe", "gpu-softmax"]) == 0
    out = capsys.readouterr().out
    assert "inside the Pallas kernels" in out
    assert "forward: exp|exp2 (the exponentials of the shifted logits)" in out


def test_a_perturbed_result_keeps_its_sign_and_shrinks_unevenly():
    x = jnp.array([-3.0, -0.5, 0.0, 0.25, 1.0, 40.0], jnp.float32)
    y = kernel_eval.perturbed(x)
    assert bool(jnp.all(jnp.sign(y) == jnp.sign(x)))
    assert bool(jnp.all(jnp.abs(y) <= 0.75 * jnp.abs(x) + 1e-7))
    ratio = (y / jnp.where(x == 0, 1.0, x))[jnp.array([0, 3, 5])]
    assert float(jnp.max(ratio) - jnp.min(ratio)) > 0.1  # not a uniform scale
    assert kernel_eval.perturbed(jnp.arange(3)).dtype == jnp.int32  # integers untouched


def _cancelled_kernel(x_ref, o_ref):
    e = jnp.exp(x_ref[...] - jnp.max(x_ref[...], axis=-1, keepdims=True))
    o_ref[...] = x_ref[...] + jnp.minimum(e, 0.0) + 0.0 * jnp.sum(e, axis=-1, keepdims=True)


@pytest.mark.parametrize("kernel, moves", [
    pytest.param(_softmax_kernel, True, id="the-real-kernel"),
    pytest.param(_sum_in_a_loop_under_when, True, id="sum-in-a-loop-under-when"),
    pytest.param(_cancelled_kernel, False, id="core-computed-and-cancelled"),
])
def test_perturbing_the_core_inside_the_body_moves_a_real_kernels_result(kernel, moves):
    x = jax.random.normal(jax.random.PRNGKey(0), (8, 128), jnp.float32)
    eqn = jax.make_jaxpr(lambda x: pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=True)(x))(x)
    eqn = eqn.jaxpr.eqns[0]
    body, count = kernel_probes.perturbed_body(eqn.params, frozenset({"exp", "reduce_sum"}))
    assert count > 0
    moved = eqn.primitive.bind(x, **dict(eqn.params, jaxpr=body))[0]
    base = eqn.primitive.bind(x, **eqn.params)[0]
    assert bool(jnp.any(moved != base)) == moves


def test_the_core_is_sampled_across_the_kernels_a_factory_makes():
    """A factory (splash makes one kernel per mask) hands out a new callable per
    configuration: the core's sampling (the first configuration, then one in EVERY)
    counts them together, so the forward's kernels are not compiled twice more for each.
    Until 2026-12-06 each product counted from zero and every configuration was perturbed
    (splash's ci matches-reference: 40 perturbed programs, 44 s of compiling)."""
    from kernel_harness.run import kernel_core_value, kernel_count

    expected = KernelExpectation(forward_computes={"exp|exp2": "the exponentials",
                                                   "reduce_sum": "the row sums"})

    def factory(width):
        def kernel(x):
            return pl.pallas_call(_softmax_kernel, out_shape=jax.ShapeDtypeStruct(
                x.shape, x.dtype), interpret=True)(x)
        return kernel

    wrapped = kernel_count.Counting(factory, expected)
    judged = []
    for rows in range(1, 33):
        made = wrapped(rows)
        made(jnp.ones((rows, 128), jnp.float32))
        ((key, (count, _)),) = made._memo.items()
        judged.append((key, bool(count.poison.core)))
    # The first, then exactly those the stable hash samples: not all 32.
    assert judged[0][1]
    assert [j for _, j in judged[1:]] == [kernel_core_value.perturbs(1, k) for k, _ in judged[1:]]
    assert sum(j for _, j in judged) < 8, judged


def test_a_kernel_body_is_followed_once_per_taint_and_sources(monkeypatch):
    """kernel_flow remembers what a kernel body's flow was (a body is entered at every pass
    of the fixed point around it, for every group, in every program holding it): the
    same verdict, and the body not walked again."""
    x = jnp.ones((8, 128), jnp.float32)
    jaxpr = jax.make_jaxpr(lambda x: pl.pallas_call(
        _softmax_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        interpret=True)(x))(x)
    first = kernel_flow.reach(jaxpr, [EXP, SUM])
    assert first == [(True, (True, True))]
    walked = []
    real = kernel_flow._run
    monkeypatch.setattr(kernel_flow, "_run", lambda j, *a, **k: (
        walked.append(a[2] if len(a) > 2 else None), real(j, *a, **k))[1])
    assert kernel_flow.reach(jaxpr, [EXP, SUM]) == first
    assert walked and True not in walked  # the body (in_kernel=True) not walked again


@pytest.mark.triton_ops  # gpu-norm's kernels: jax <= 0.12.0.1
def test_data_that_cancels_the_core_is_not_a_cancelled_core():
    """A pristine rms_norm on rows that are all zero (ReLU output of rows offset by -40
    spreads): out = 0 * rsqrt(...) * w + b, whatever the core computes; the case's data
    cancels it, so the perturbation is judged again on fresh data, where it moves out (a
    free draw named this pristine kernel `reduce_sum|rsqrt|sqrt cancelled in the kernel`)."""
    from kernel_harness.core.backends import resolve_backend
    from kernel_harness.ops.norm.cases import NormCase
    from kernel_harness.records import registry
    from kernel_harness.run.runner import check_case

    case = NormCase(dtype="float32", seed=113882, op="rms_norm", leading=(1, 16), n=1,
                    eps=1e-5, spread=0.01, offset=-40.0, affine="random", rectified=True)
    assert not case.materialize()["x"].any()  # every row zero
    result = check_case(registry.get_family("gpu-norm"), case, resolve_backend("interpret"))
    assert result.passed and not result.kernels.outside, result.kernels.outside
