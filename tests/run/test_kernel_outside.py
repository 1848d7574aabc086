"""The kernel computes, not copies (issue 55, item 3): an implementation whose Pallas
kernel only copies an answer computed outside it (XLA, numpy through a ``pure_callback``),
or does one small part of it (the row max) while XLA does the rest, runs as many kernels as
the pristine one and its outputs depend on them, so the count and poisoning pass it; the
measure of the math outside the kernels fails it, naming the class, the primitives and the
pass. The pristine kernels pass; a family's declaration allows what it names."""

import dataclasses
import functools
import json

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

from kernel_harness import cli
from kernel_harness.core.backends import resolve_backend
from kernel_harness.families.gpu_mha.cases import MhaCase
from kernel_harness.ops.grouped_matmul.cases import GmmCase
from kernel_harness.ops.norm.cases import NormCase
from kernel_harness.ops.softmax.cases import SoftmaxCase
from kernel_harness.records.impl import load_impl
from kernel_harness.records.kernels import KernelExpectation
from kernel_harness.records.outside import METADATA_SUFFIX, VALUES_SUFFIX, OutsideKernel
from kernel_harness.records.registry import get_family
from kernel_harness.run import kernel_outside, report
from kernel_harness.run.runner import check_case

IMPLS = "tests.helpers.outside_impls"
SOFTMAX = SoftmaxCase(dtype="float32", seed=1, leading=(4,), n=128)
NORM = NormCase(dtype="float32", seed=0, op="layer_norm", leading=(2, 4), n=128)
GMM = GmmCase(dtype="float32", seed=0, m=16, k=128, n=128, group_sizes=(8, 8),
              tiling=(8, 128, 128))
MHA = MhaCase(dtype="float32", seed=0, batch=1, q_heads=2, kv_heads=2, q_len=32, kv_len=32,
              head_dim=16)
F32 = jax.ShapeDtypeStruct((64, 128), jnp.float32)


def _check(family, case, impl=None, record=None):
    spec = impl and f"{IMPLS}:{impl}"
    fam = get_family(family) if record is None else record
    return check_case(fam, case, resolve_backend("interpret"), spec and load_impl(spec),
                      impl_spec=spec)


def _measure(fn, *avals):
    jaxpr = jax.make_jaxpr(fn)(*avals)
    problem = kernel_outside.problem_size(tuple(a.shape) for a in avals)
    return kernel_outside.measure([jaxpr], problem)


def _copy(x):
    def body(x_ref, o_ref):
        o_ref[...] = jnp.exp(x_ref[...])  # math inside a kernel body is the kernel's

    return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          interpret=True)(x)


def test_math_inside_a_kernel_or_on_small_arrays_is_not_measured():
    assert _measure(_copy, F32) == ()
    # a per-row statistic's rsqrt (64 of 8192 elements), an integer cumsum, a scalar divide
    assert _measure(lambda x: x * jax.lax.rsqrt(jnp.ones((64, 1))) + jnp.cumsum(
        jnp.arange(8192).reshape(64, 128), axis=1) + x[0, 0] / 3.0, F32) == ()


def test_math_outside_is_measured_in_bodies_and_summed_over_chunks():
    assert _measure(lambda x: _copy(jax.nn.softmax(x)), F32) == (
        "div", "exp", "reduce_max", "reduce_sum")
    # one row at a time in a scan: 128 elements per trip, 64 trips
    assert _measure(lambda x: jax.lax.scan(lambda c, r: (c, jnp.exp(r)), 0.0, x)[1],
                    F32) == ("exp",)
    # one row at a time, unrolled: 64 equations of 128 elements each
    assert _measure(lambda x: jnp.stack([jnp.tanh(x[i]) for i in range(64)]), F32) == (
        "tanh",)
    # in a while loop (trips unknown), in a cond's branch, under a custom_vjp
    assert _measure(lambda x: jax.lax.while_loop(lambda c: c[0] < 1, lambda c: (
        c[0] + 1, jnp.log(c[1])), (0, x[0, :2]))[1], F32) == ("log",)
    assert _measure(lambda x: jax.lax.cond(x[0, 0] > 0, lambda x: x @ x.T, lambda x: x[:, :64],
                                           x), F32) == ("dot_general",)
    peak = jax.custom_vjp(lambda x: jnp.max(x, axis=0))
    peak.defvjp(lambda x: (peak(x), x), lambda x, g: (jnp.zeros_like(x),))
    assert _measure(peak, F32) == ("reduce_max",)


def test_every_primitive_but_layout_and_elementwise_is_measured():
    """An allowlist, not a list of the arithmetic an answer could be spelled with: a sort,
    an FFT, a triangular solve, a scatter-add carry an answer as well as a sum does (round 4
    of the adversarial set passed with them); layout, casts, indexing and elementwise
    arithmetic are never measured."""
    tri = jnp.tril(jnp.ones((64, 64))) + jnp.eye(64)
    assert _measure(lambda x: _copy(jnp.sort(x, axis=1)), F32) == ("sort",)
    assert _measure(lambda x: _copy(jnp.fft.rfft(x, axis=1).real[:, :64].repeat(2, 1)),
                    F32) == ("fft",)
    assert _measure(lambda x: _copy(jax.lax.linalg.triangular_solve(
        tri, x, left_side=True, lower=True)), F32) == ("triangular_solve",)
    assert _measure(lambda x: _copy(jnp.zeros_like(x).at[jnp.arange(64) % 8].add(x)),
                    F32) == ("scatter-add",)
    def layout(x):
        y = jnp.where(x > 0, x * 2.0 - 1.0, jnp.floor(-x)).T.reshape(64, 128)[::-1]
        return _copy(y.astype(jnp.bfloat16).astype(jnp.float32)
                     + jnp.pad(x[:, 1:], ((0, 0), (0, 1))))

    assert _measure(layout, F32) == ()


def test_a_host_callback_is_measured_by_what_it_touches_and_a_debug_one_is_not():
    def f(x):
        jax.debug.callback(lambda a: None, x)
        jax.debug.print("{}", x[0, 0])
        return x + jax.pure_callback(lambda a: a, jax.ShapeDtypeStruct((), jnp.float32),
                                     x[0, 0])

    def g(x):  # the inputs to the host and an answer back
        return jax.pure_callback(lambda a: a, jax.ShapeDtypeStruct(x.shape, x.dtype), x)

    assert _measure(f, F32) == ()  # a scalar flag read from the host is not an answer
    assert _measure(g, F32) == ("pure_callback",)


def _kernel(body, x):
    return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          interpret=True)(x)


def test_a_host_callback_answering_inside_a_kernel_body_counts_at_any_size():
    def scalar_from_host(x_ref, o_ref):  # one element back per kernel: still the host's
        s = jax.pure_callback(lambda a: a, jax.ShapeDtypeStruct((), jnp.float32),
                              x_ref[0, 0])
        o_ref[...] = x_ref[...] * s

    def io_from_host(x_ref, o_ref):
        o_ref[...] = jax.experimental.io_callback(
            lambda a: a, jax.ShapeDtypeStruct((8, 128), jnp.float32), x_ref[:8, :])[0, 0] + (
            x_ref[...])

    def observes(x_ref, o_ref):  # debugging: returns nothing to the kernel
        jax.debug.print("{}", x_ref[0, 0])
        jax.debug.callback(lambda a: None, x_ref[...])
        jax.experimental.io_callback(lambda a: None, None, x_ref[0, 0])
        o_ref[...] = jnp.exp(x_ref[...])

    answers = functools.partial(_kernel, scalar_from_host)
    assert _measure(answers, F32) == ("pure_callback in a kernel body",)
    assert _measure(jax.jit(answers), F32) == ("pure_callback in a kernel body",)
    assert _measure(lambda x: jax.lax.cond(x[0, 0] > 0, answers, jnp.tanh, x), F32) == (
        "pure_callback in a kernel body", "tanh")
    assert _measure(functools.partial(_kernel, io_from_host), F32) == (
        "io_callback in a kernel body",)
    assert _measure(functools.partial(_kernel, observes), F32) == ()


def test_a_buffer_callback_outside_is_a_host_callback_too():
    from jax.experimental.buffer_callback import buffer_callback

    def g(x):
        return buffer_callback(lambda ctx, out, a: None, jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

    assert _measure(g, F32) == ("buffer_callback",)


def _debugged_softmax(x, *, axis=-1, interpret=False):
    """A softmax computed in its kernel, printing and observing its block as a kernel being
    debugged does."""
    def body(x_ref, o_ref):
        v = x_ref[...].astype(jnp.float32)
        jax.debug.print("first logit {}", v[0, 0])
        jax.debug.callback(lambda a: None, v)
        e = jnp.exp(v - v.max(axis=-1, keepdims=True))
        o_ref[...] = (e / e.sum(axis=-1, keepdims=True)).astype(o_ref.dtype)

    return _kernel(body, x)


@pytest.mark.triton_ops
def test_a_kernel_asking_the_host_fails_and_one_printing_passes():
    spec = "tests.helpers.generic_cheats:host_in_kernel_softmax"
    family = get_family("gpu-softmax")
    result = check_case(family, SOFTMAX, resolve_backend("interpret"), load_impl(spec),
                        impl_spec=spec)
    # what passed before: the count, poisoning, the reference
    assert not result.kernel_problem and not result.unused_results
    assert all(v.passed for v in result.verdicts) and not result.passed
    # (its body computes nothing, so the op's core is in no kernel either)
    assert result.outside_math == {"forward": (
        "exp|exp2 in no kernel", "pure_callback in a kernel body", "reduce_sum in no kernel")}
    first = report.summary_lines(result)[0]
    assert first.startswith("[kernel-harness] FAIL gpu-softmax math outside the kernel "
                            "(forward: exp|exp2 in no kernel, pure_callback in a kernel body, "
                            "reduce_sum in no kernel) "), first
    assert ("pure_callback in a kernel body (forward): a host callback returns values into "
            "the kernel") in first
    # no family may allow it: allowing host callbacks outside does not excuse one inside
    allows = dataclasses.replace(family, outside_kernel=OutsideKernel(
        forward={"pure_callback": "planted"}))
    assert not check_case(allows, SOFTMAX, resolve_backend("interpret"),
                          load_impl(spec)).passed
    with pytest.raises(ValueError, match="does not measure"):
        OutsideKernel(forward={"pure_callback in a kernel body": "planted"})
    debugged = check_case(family, SOFTMAX, resolve_backend("interpret"), _debugged_softmax)
    assert debugged.passed, report.failure_report(debugged)
    assert debugged.outside_math == {}


def test_a_declaration_validates_its_primitives_and_reasons():
    with pytest.raises(ValueError, match="does not measure or does not know: \\['multiply'\\]"):
        OutsideKernel(forward={"multiply": "why"})
    with pytest.raises(ValueError, match="needs its reason"):
        OutsideKernel(backward={"exp": " "})
    allowed = OutsideKernel(forward={"reduce_max": "the scales"})
    assert allowed.describe() == ["forward: reduce_max (the scales)"]
    assert "nothing beyond layout" in OutsideKernel().describe()[0]


def test_what_a_wrapper_reads_the_data_with_is_declared_and_judged():
    with pytest.raises(ValueError, match="needs its reason"):
        OutsideKernel(reads={"add": ""})
    with pytest.raises(ValueError, match="layout-only wrapper"):
        OutsideKernel(reads={"add": "why"}, layout_only="why")
    combine = OutsideKernel(reads={"add": "the combine"})
    assert "reads the data's values with: add (the combine)" in combine.describe()
    found = {"forward": ("add" + VALUES_SUFFIX, "eq" + VALUES_SUFFIX,
                         "select_n" + VALUES_SUFFIX)}
    # one name for what it reads otherwise than declared; nothing judged where undeclared
    assert kernel_outside.disallowed(found, combine) == {
        "forward": ("eq, select_n" + VALUES_SUFFIX,)}
    assert kernel_outside.disallowed(found, OutsideKernel()) == {}
    # said only where nothing else is
    assert kernel_outside.disallowed({"forward": (*found["forward"], "exp")}, combine) == {
        "forward": ("exp",)}
    # the integer inputs' reads: judged alike, unless the family says why it computes them
    ints = {"forward": ("and" + METADATA_SUFFIX, "eq" + METADATA_SUFFIX)}
    assert kernel_outside.disallowed(ints, OutsideKernel(layout_only="why")) == {
        "forward": ("and, eq" + METADATA_SUFFIX,)}
    assert kernel_outside.disallowed(ints, OutsideKernel(layout_only="why",
                                                         metadata="tiles")) == {}


SOFTMAX_ALL = ("div", "exp", "reduce_max", "reduce_sum")
#: The softmax op's core (``KernelExpectation.forward_computes``), in no copy kernel.
SOFTMAX_CORE = ("exp|exp2 in no kernel", "reduce_sum in no kernel")
SOFTMAX_NAMED = tuple(sorted(SOFTMAX_ALL + SOFTMAX_CORE))


@pytest.mark.parametrize("family, case, impl, found", [
    ("gpu-softmax", SOFTMAX, "copy_softmax", {"forward": SOFTMAX_ALL}),
    ("gpu-softmax", SOFTMAX, "rowmax_softmax", {"forward": ("div", "exp", "reduce_sum")}),
    ("gpu-softmax", SOFTMAX, "callback_softmax", {"forward": ("pure_callback",)}),
    ("gpu-norm", NORM, "copy_norm", {"forward": ("reduce_sum",),
                                     "backward": ("reduce_sum",)}),
    ("megablox-gmm", GMM, "copy_gmm", {"forward": ("dot_general",),
                                       "backward": ("dot_general",)}),
    ("gpu-mha", MHA, "copy_mha", {"forward": ("dot_general", "exp", "reduce_max",
                                              "reduce_sum"),
                                  "backward": ("dot_general", "reduce_sum")}),
])
def test_a_kernel_that_does_not_compute_fails_naming_its_class(family, case, impl, found):
    result = _check(family, case, impl)
    # what passed before: the kernel count, poisoning and the reference
    assert not result.kernel_problem and not result.unused_results
    assert all(v.passed for v in result.verdicts)
    for where, names in found.items():  # the primitives that make the answer, at least
        assert set(names) <= set(result.outside_math.get(where, ())), result.outside_math
    assert not result.passed
    first = report.summary_lines(result)[0]
    what = "; ".join(f"{k}: {', '.join(v)}" for k, v in result.outside_math.items())
    assert first.startswith(f"[kernel-harness] FAIL {family} math outside the kernel "
                            f"({what})"), first
    for where in found:
        names = ", ".join(n for n in result.outside_math[where] if not n.endswith(" kernel"))
        assert f"{names} outside any Pallas kernel ({where})" in first
    core = get_family(family).kernels.computes_lines()
    for line in core:  # the declared core, computed by no kernel of a copy
        where, group = line.split(" (")[0].split(": ")
        assert f"{group} in no kernel" in result.outside_math[where], result.outside_math


@pytest.mark.parametrize("family, case", [("gpu-softmax", SOFTMAX), ("gpu-norm", NORM),
                                          ("megablox-gmm", GMM), ("gpu-mha", MHA)])
def test_the_pristine_kernels_compute_inside_and_pass(family, case):
    result = _check(family, case)
    assert result.passed, report.failure_report(result)
    assert result.outside_math == {}
    expected = get_family(family).kernels
    assert result.kernels.forward >= expected.forward
    assert (result.kernels.backward or 0) >= expected.backward


@pytest.mark.triton_ops
def test_what_the_family_declares_is_allowed_and_nothing_more():
    family = get_family("gpu-softmax")
    # (without the op's core declared inside the kernels, which a row-max kernel lacks)
    allows = dataclasses.replace(family, outside_kernel=OutsideKernel(
        forward={"exp": "planted", "reduce_sum": "planted", "div": "planted"}),
        kernels=KernelExpectation(forward=1))
    assert _check("gpu-softmax", SOFTMAX, "rowmax_softmax", record=allows).passed
    result = _check("gpu-softmax", SOFTMAX, "copy_softmax", record=allows)
    assert result.outside_math == {"forward": ("reduce_max",)} and not result.passed
    assert "what the family allows outside its kernels: forward: div, exp, reduce_sum" in (
        report.summary_lines(result)[0])


@pytest.mark.triton_ops
def test_the_cli_fails_it_in_the_events_and_the_json_and_describe_prints_the_rule(
        capsys, tmp_path):
    path = tmp_path / "r.json"
    code = cli.main(["check", "--no-isolate", "gpu-softmax", "--profile", "dev", "--seed", "1",
                     "--max-examples", "2", "--shrink-budget", "0", "--property",
                     "matches-reference", "--impl", f"{IMPLS}:copy_softmax",
                     "--json", str(path)])
    out = capsys.readouterr().out
    assert code == 1, out
    assert f"math outside the kernel: {', '.join(SOFTMAX_NAMED)} (forward)=" in out
    record = json.loads(path.read_text())["properties"][0]
    assert record["kernels"]["outside"] == record["checks"] > 0
    assert "math outside the kernel (forward: " in record["failure"]["summary"][0]
    assert cli.main(["describe", "gpu-softmax", "--samples", "0"]) == 0
    text = capsys.readouterr().out
    assert "pallas kernels per call: fwd >= 1" in text and "nothing beyond layout" in text


@pytest.mark.triton_ops
def test_a_metamorphic_relation_between_copy_kernel_runs_fails_too(capsys):
    """Two runs of a copy kernel agree with each other: the relation says nothing of the
    kernel, so the example fails on its math outside, as in matches-reference."""
    code = cli.main(["check", "--no-isolate", "gpu-softmax", "--profile", "dev", "--seed", "1",
                     "--max-examples", "2", "--shrink-budget", "0", "--property",
                     "deterministic", "--impl", f"{IMPLS}:copy_softmax"])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "math outside the kernel: run 1: exp|exp2 in no kernel; reduce_sum in no kernel" in (
        out), out
    assert f"{', '.join(SOFTMAX_ALL)} outside any Pallas kernel (forward)" in out, out
