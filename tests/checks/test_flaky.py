"""The FLAKY verdict without a kernel (issue 55, item 9): a failure that does not recur on
Hypothesis's replay is told apart from one that does, and a property outcome holding one is
a FLAKY record (schema-valid, with the failing run's case and repro) and a FLAKY report.
The CLI end to end, on a planted implementation: ``tests/cli/test_flaky_verdict.py``."""

from __future__ import annotations

import json

import hypothesis
import jsonschema
import pytest
from hypothesis import Phase, given
from hypothesis import strategies as st
from hypothesis.errors import FlakyFailure, FlakyStrategyDefinition

from kernel_harness.checks import flaky
from kernel_harness.checks.metamorphic import MetamorphicFailure
from kernel_harness.checks.properties import Observer, PropertyOutcome
from kernel_harness.checks.shrinking import bounded_shrinking
from kernel_harness.core.backends import resolve_backend
from kernel_harness.ops.softmax.cases import SoftmaxCase
from kernel_harness.orchestration import outcome_text, results
from kernel_harness.run.profiles import ShrinkBudget

SETTINGS = hypothesis.settings(max_examples=20, derandomize=True, database=None, deadline=None,
                               report_multiple_bugs=False,
                               phases=(Phase.generate, Phase.shrink))
CASE = SoftmaxCase(dtype="float32", seed=1, leading=(2,), n=16)
REPRO = f"kernel-harness repro gpu-softmax --case '{CASE.to_json()}' --property deterministic"


def _run(fails_again: bool):
    calls: list[int] = []

    @SETTINGS
    @given(x=st.integers(0, 100))
    def prop(x: int) -> None:
        calls.append(x)
        if len(calls) == 1 or fails_again:
            raise AssertionError(f"[kernel-harness] FAIL toy x={x}\n  reproduce: {REPRO}")

    restore, report = bounded_shrinking(prop, budget=ShrinkBudget(seconds=60, steps=3),
                                        label="toy p")
    with pytest.raises(BaseException) as info:
        prop()
    restore()
    return report, info.value


def test_a_failure_that_passes_on_the_replay_is_flaky_and_says_so():
    report, error = _run(fails_again=False)
    assert flaky.flaky_failure(error) is error and report.replayed == "passed"
    first = flaky.first_failure(error)
    assert str(first).startswith("[kernel-harness] FAIL toy x=")


def test_a_failure_that_recurs_is_not_flaky():
    report, error = _run(fails_again=True)
    assert flaky.flaky_failure(error) is None and isinstance(error, AssertionError)
    assert report.replayed is not None
    assert report.replayed.startswith("[kernel-harness] FAIL toy x=")
    assert flaky.flaky_failure(FlakyStrategyDefinition("Inconsistent data generation")) is None


def _outcome() -> PropertyOutcome:
    first = MetamorphicFailure(
        "[kernel-harness] FAIL gpu-softmax deterministic float32 rows=2: out: 3 element(s) "
        f"changed that must not (rerunning)\n  impl: m:f\n  reproduce: {REPRO}",
        case=CASE, draws_json="[]", impl="m:f")
    error = FlakyFailure("Hypothesis prop produces unreliable results: Failed on the first "
                         "call but did not on a subsequent one", [first])
    observer = Observer(examples=2, passed=1)
    return PropertyOutcome(family="gpu-softmax", prop="deterministic",
                           backend=resolve_backend("interpret"), observer=observer,
                           error=error, wall_seconds=1.0)


def test_a_flaky_outcome_is_a_flaky_verdict_report_and_schema_valid_record():
    outcome = _outcome()
    assert outcome_text.verdict(outcome) == "FLAKY"
    text = outcome_text.failure_text(outcome).splitlines()
    assert text[0].startswith("[kernel-harness] FLAKY gpu-softmax deterministic float32 ")
    assert text[1].startswith("  failing run: [kernel-harness] FAIL gpu-softmax determ")
    assert text[-1] == f"  reproduce: {REPRO}" and "FlakyFailure" not in "\n".join(text)
    record = results.outcome_record(outcome)
    assert record["verdict"] == "FLAKY"
    failure = record["failure"]
    assert failure["repro"] == REPRO and failure["case_json"] == CASE.to_json()
    assert failure["impl"] == "m:f" and failure["summary"][0] == text[0]
    doc = results.document({}, [record])
    assert doc["summary"]["flaky"] == 1 and doc["summary"]["ok"] is False
    schema = json.loads(results.SCHEMA_PATH.read_text())
    jsonschema.validate(record, {"$ref": "#/$defs/property", "$defs": schema["$defs"]})
