"""The kernel's result is the answer (issue 55): an implementation that launches its
Pallas kernel as often as the pristine one but returns plain JAX's answer (the result
thrown away, times zero plus XLA's, the kernel in a zero-trip ``while`` or an untaken
``cond`` branch, a backward kernel whose gradients are dropped) passes the kernel count
and the reference; poisoning every executed kernel's result fails it, naming the class
and the output, in the one-line report, the events and the JSON. The pristine kernels
(rows past gmm's groups, which no kernel writes, included) pass, judged."""

import json

import jsonschema
import pytest

from kernel_harness import cli
from kernel_harness.core.backends import resolve_backend
from kernel_harness.families.gpu_mha.cases import MhaCase
from kernel_harness.ops.grouped_matmul.cases import GmmCase
from kernel_harness.ops.softmax.cases import SoftmaxCase
from kernel_harness.orchestration import results
from kernel_harness.records.impl import load_impl
from kernel_harness.records.registry import get_family
from kernel_harness.run import report
from kernel_harness.run.runner import check_case

IMPLS = "tests.helpers.poison_impls"
SOFTMAX = SoftmaxCase(dtype="float32", seed=1, leading=(2,), n=128)
#: 8 of 16 rows in groups: the rows past them are the wrapper's, not a kernel's.
GMM = GmmCase(dtype="float32", seed=0, m=16, k=128, n=128, group_sizes=(3, 5),
              tiling=(8, 128, 128))
MHA = MhaCase(dtype="float32", seed=0, batch=1, q_heads=2, kv_heads=2, q_len=32, kv_len=32,
              head_dim=16)
OUT = ("output `result`",)
GRADS = ("gradient of `lhs`", "gradient of `rhs`")


def _check(family, case, impl=None):
    spec = impl and f"{IMPLS}:{impl}"
    return check_case(get_family(family), case, resolve_backend("interpret"),
                      spec and load_impl(spec), impl_spec=spec)


@pytest.mark.parametrize("family, case, impl, unused", [
    ("gpu-softmax", SOFTMAX, "thrown_softmax", OUT),
    ("gpu-softmax", SOFTMAX, "times_zero_softmax", OUT),
    ("gpu-softmax", SOFTMAX, "zero_trip_softmax", OUT),
    ("gpu-softmax", SOFTMAX, "untaken_cond_softmax", OUT),
    ("megablox-gmm", GMM, "times_zero_gmm", OUT),
    ("megablox-gmm", GMM, "thrown_backward_gmm", GRADS),
    ("gpu-mha", MHA, "thrown_backward_mha", ("gradient of `q`", "gradient of `k`",
                                            "gradient of `v`")),
])
def test_a_kernel_result_the_answer_ignores_fails_naming_its_class(family, case, impl,
                                                                    unused):
    result = _check(family, case, impl)
    assert not result.fell_back and all(v.passed for v in result.verdicts)  # passed before
    assert result.unused_results == unused and not result.passed
    first = report.summary_lines(result)[0]
    assert first.startswith(f"[kernel-harness] FAIL {family} kernel result unused "
                            f"({', '.join(unused)})"), first
    assert (f"the implementation's {unused[0]} does not depend on any executed Pallas "
            "kernel: replacing every kernel's result by two different fills left it "
            "unchanged") in first


def test_a_result_thrown_away_with_its_backward_fails_on_both_counts():
    result = _check("megablox-gmm", GMM, "thrown_gmm")
    assert result.fell_back == ("bwd",) and result.unused_results == OUT
    lines = report.summary_lines(result)
    assert "no Pallas kernel (bwd)" in lines[0] and "kernel result unused" in lines[1]


@pytest.mark.triton_ops
def test_an_attention_result_thrown_away_fails_on_every_output_of_every_call():
    result = _check("gpu-mha", MHA, "thrown_mha")
    assert {"output `result`", "output `result[0]`", "output `result[1]`"} <= set(
        result.unused_results)
    assert not result.passed


@pytest.mark.parametrize("family, case", [("gpu-softmax", SOFTMAX), ("megablox-gmm", GMM),
                                          ("gpu-mha", MHA)])
def test_the_pristine_kernels_pass_judged(family, case):
    result = _check(family, case)
    assert result.passed, report.failure_report(result)
    assert result.kernels.poisoned and result.kernels.unused == ()
    assert result.kernels.poison_error is None


@pytest.mark.triton_ops
def test_the_verdict_is_a_fail_in_the_events_and_the_json(capsys, tmp_path):
    path = tmp_path / "r.json"
    code = cli.main(["check", "--no-isolate", "gpu-softmax", "--profile", "dev", "--seed", "1",
                     "--max-examples", "2", "--shrink-budget", "0", "--property",
                     "matches-reference", "--impl", f"{IMPLS}:thrown_softmax",
                     "--json", str(path)])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "kernel result unused: output `result`=" in out
    doc = json.loads(path.read_text())
    jsonschema.validate(doc, json.loads(results.SCHEMA_PATH.read_text()))
    record = doc["properties"][0]
    assert record["verdict"] == "FAIL"
    assert record["kernels"]["unused"] == record["checks"] > 0
    assert record["kernels"]["fell_back"] == 0
    assert "kernel result unused (output `result`)" in record["failure"]["summary"][0]


@pytest.mark.triton_ops
def test_the_adapters_own_program_gets_no_host_callback():
    """A program with a host callback is never persistently cached: the inputs come from a
    second run on a probe instead."""
    import jax
    import jax.numpy as jnp

    from kernel_harness.records.kernels import KernelExpectation
    from kernel_harness.run import kernel_count
    from tests.helpers.poison_impls import thrown_softmax

    wrapper = kernel_count.counting(thrown_softmax, KernelExpectation())
    jaxpr = jax.make_jaxpr(lambda x: wrapper(x, axis=-1, interpret=True))(
        jax.ShapeDtypeStruct((2, 128), jnp.float32))
    assert "pallas_call" in str(jaxpr) and "callback" not in str(jaxpr)
    probed = jax.make_jaxpr(lambda x: wrapper.probe()(x, axis=-1, interpret=True))(
        jax.ShapeDtypeStruct((2, 128), jnp.float32))
    assert "pallas_call" not in str(probed)
