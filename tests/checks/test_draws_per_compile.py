"""draws_per_compile: K data draws judged per compiled static configuration, each a case of
its own (its repro replays exactly that draw); checks/compiles/rejected counted right."""

from __future__ import annotations

import dataclasses
import json
import shlex

import hypothesis
import numpy as np
import pytest
from hypothesis import assume
from hypothesis import strategies as st

from kernel_harness import cli
from kernel_harness.checks import draws, metamorphic
from kernel_harness.checks.properties import (
    HarnessFailure,
    Observer,
    build_property,
    run_property,
)
from kernel_harness.core.backends import resolve_backend
from kernel_harness.orchestration import results
from kernel_harness.records import registry
from kernel_harness.records.hooks import Metamorphic
from kernel_harness.run.profiles import (
    DRAWS_PER_COMPILE,
    ShrinkBudget,
    draws_per_compile,
    get_profile,
)
from kernel_harness.run.runner import check_case
from tests.helpers.toy_family import FAMILY, ToyCase
from tests.helpers.toy_impls import wrong_when_first_above_1

BACKEND = resolve_backend("interpret")
PLANTED = "tests.helpers.toy_impls:wrong_when_first_above_1"
#: The toy strategy with the seed pinned to 0: a data bug x[0] > 1 never shows in its own
#: draws (checked below), only in the other data draws of the same configuration.
PINNED = dataclasses.replace(FAMILY, cases=lambda: st.builds(
    ToyCase, dtype=st.just("float32"), seed=st.just(0), length=st.sampled_from([4, 8])))


def _counting(family):
    """The family, and the list of the cases its adapter ran (in order)."""
    ran = []

    def run(impl, case, inputs, backend):
        ran.append(case)
        return family.run(impl, case, inputs, backend)

    return dataclasses.replace(family, run=run), ran


def _judged(ran):
    """The runs judged: the first case of each compiled program runs twice in a row (the
    bitwise rerun inside matches-reference, kernel_harness/run/rerun.py), counted once."""
    out = []
    for case in ran:
        if not (out and case is out[-1]):
            out.append(case)
    return out


def _run(family, k, *, impl=None, max_examples=6, shrink=None):
    obs = Observer()
    prop = build_property("matches-reference", family, backend=BACKEND, impl=impl,
                          impl_spec=PLANTED if impl else None, observer=obs,
                          draws_per_compile=k)
    outcome = run_property("matches-reference", family, prop, backend=BACKEND, observer=obs,
                           profile=get_profile("ci"), max_examples=max_examples,
                           shrink_budget=shrink)
    return outcome, obs


def test_the_pinned_draws_cannot_expose_the_planted_bug():
    for length in (4, 8):
        case = ToyCase(dtype="float32", seed=0, length=length)
        assert case.materialize()["x"][0] <= 1.0
        assert check_case(FAMILY, case, BACKEND, wrong_when_first_above_1).passed
    outcome, obs = _run(PINNED, 1, impl=wrong_when_first_above_1)
    # Hypothesis stops once it has tried both configurations: all the pinned draws there are.
    assert outcome.passed and obs.checks == obs.examples == 2


def test_a_bug_only_other_draws_expose_is_caught_and_its_repro_replays_that_draw(
        monkeypatch, capsys):
    outcome, obs = _run(PINNED, 4, impl=wrong_when_first_above_1)
    assert not outcome.passed
    (failure,) = [e for e in [outcome.error] if isinstance(e, HarnessFailure)]
    case = failure.result.case
    assert case.seed != 0  # a data draw of the configuration, not the strategy's own case
    replayed = ToyCase.from_json(case.to_json())
    assert replayed == case and replayed.materialize()["x"][0] > 1.0
    assert not check_case(FAMILY, replayed, BACKEND, wrong_when_first_above_1).passed
    # The printed repro command is that draw's, and it fails again (exit 1).
    repro = next(ln.split("reproduce: ", 1)[1] for ln in str(failure).splitlines()
                 if "reproduce: kernel-harness repro" in ln)
    argv = shlex.split(repro)
    assert argv[argv.index("--case") + 1] == case.to_json()
    monkeypatch.setitem(registry.BUILTIN_FAMILIES, "toy", "tests.helpers.toy_family:FAMILY")
    assert cli.main(argv[1:]) == 1


def test_shrinking_works_on_the_draws():
    outcome, obs = _run(PINNED, 4, impl=wrong_when_first_above_1, max_examples=10,
                        shrink=ShrinkBudget(seconds=60, steps=200))
    assert not outcome.passed and outcome.shrink is not None and outcome.shrink.steps > 0
    case = outcome.error.result.case
    assert not check_case(FAMILY, case, BACKEND, wrong_when_first_above_1).passed
    assert case.length == 4  # shrunk to the smaller configuration


def test_checks_and_compiles_are_counted_for_the_toy_family():
    family, ran = _counting(FAMILY)
    outcome, obs = _run(family, 3, max_examples=6)
    assert outcome.passed
    judged = _judged(ran)
    assert obs.examples == 6 and obs.checks == len(judged) == 18 and obs.rejected == 0
    assert len(ran) == 18 + obs.compiles  # one bitwise rerun per compiled program
    # Every example's three draws share one static configuration, and differ in data.
    for i in range(0, len(judged), 3):
        group = judged[i:i + 3]
        assert len({c.static_key() for c in group}) == 1
        assert len({c.seed for c in group}) > 1 or group[0].seed == 0
    assert obs.compiles == len({c.static_key() for c in ran}) == 2
    record = results.outcome_record(outcome)
    assert (record["examples"], record["checks"], record["compiles"]) == (6, 18, 2)


def test_one_draw_per_compile_is_one_check_per_example():
    family, ran = _counting(FAMILY)
    outcome, obs = _run(family, 1, max_examples=5)
    assert outcome.passed and obs.examples == obs.checks == len(_judged(ran)) == 5
    assert len(ran) == 5 + obs.compiles  # one bitwise rerun per compiled program


def test_a_hook_that_changes_the_static_configuration_is_a_clear_error():
    bad = dataclasses.replace(FAMILY, data_draws=lambda case: st.just(
        dataclasses.replace(case, length=12 - case.length)))
    outcome, obs = _run(bad, 2, max_examples=2)
    assert isinstance(outcome.error, ValueError)
    assert "another static configuration" in str(outcome.error)


@pytest.mark.parametrize("k", [0, -1, 1.5, True])
def test_draws_per_compile_must_be_a_whole_number_from_1(k):
    with pytest.raises(ValueError, match="draws_per_compile"):
        build_property("matches-reference", FAMILY, backend=BACKEND, draws_per_compile=k)


def test_profile_defaults():
    assert draws_per_compile("ci") == DRAWS_PER_COMPILE["ci"] >= 1
    assert draws_per_compile("kernel-harness-nightly") == DRAWS_PER_COMPILE["nightly"]
    with pytest.raises(ValueError, match="unknown profile"):
        draws_per_compile("weekly")


def test_default_variants_change_only_the_seed():
    case = ToyCase(dtype="float32", seed=5, length=8)

    @hypothesis.settings(max_examples=20, database=None)
    @hypothesis.given(variant=draws.data_variants(FAMILY, case))
    def prop(variant):
        assert dataclasses.replace(variant, seed=case.seed) == case

    prop()


# --- rejected examples ---------------------------------------------------------------------

def _assume_length_4(check, data):
    assume(check.case.length == 4)  # rejects about half of the examples
    check.run()


def test_examples_rejected_by_assume_are_rejected_not_failed():
    hooks = Metamorphic(roles={}, visible=lambda case: np.ones((1, 1, 1, 1), bool))
    family, ran = _counting(dataclasses.replace(FAMILY, metamorphic=hooks))
    spec = metamorphic.Spec(name="toy-assume", body=_assume_length_4, needs=None,
                            fraction=1.0, doc="length 4 only")
    obs = Observer()
    prop = metamorphic.build(spec)(family, backend=BACKEND, observer=obs)
    outcome = run_property("toy-assume", family, prop, backend=BACKEND, observer=obs,
                           profile=get_profile("ci"), max_examples=10)
    assert outcome.passed
    assert obs.rejected >= 1 and obs.failed == 0
    assert obs.examples == obs.passed == obs.checks == len(ran)
    assert all(c.length == 4 for c in ran)
    record = results.outcome_record(outcome)
    assert record["verdict"] == "PASS" and record["rejected"] == obs.rejected
    assert record["examples"] == record["passed_examples"]


def test_check_json_counts_per_property(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(registry.BUILTIN_FAMILIES, "toy", "tests.helpers.toy_family:FAMILY")
    out = tmp_path / "r.json"
    code = cli.main(["check", "--no-isolate", "toy", "--profile", "ci", "--max-examples", "4",
                     "--draws-per-compile", "3", "--json", str(out)])
    assert code == 0
    (ref,) = [p for p in json.loads(out.read_text())["properties"]
              if p["property"] == "matches-reference"]
    assert (ref["examples"], ref["checks"], ref["rejected"]) == (4, 12, 0)
    assert 1 <= ref["compiles"] <= 2
    assert cli.main(["check", "toy", "--draws-per-compile", "0"]) == 2


# --- every registered family's data draws ----------------------------------------------------

@pytest.mark.parametrize("name", sorted(registry.BUILTIN_FAMILIES))
def test_each_familys_data_draws_share_the_compiled_program(name):
    family = registry.get_family(name)

    @hypothesis.settings(max_examples=4, database=None, derandomize=True, deadline=None,
                         suppress_health_check=list(hypothesis.HealthCheck))
    @hypothesis.given(cases=draws.checked_cases(family, 3))
    def prop(cases):
        first = cases[0]
        for case in cases[1:]:
            assert case.static_key() == first.static_key()
            assert type(case).from_json(case.to_json()) == case
        if name == "sdpa":  # its filters read the random mask the seed makes
            from kernel_harness.ops.attention.strategy import drawable

            assert all(drawable(c) for c in cases)

    prop()


def _float32_logit_scales_drawn(name):
    family, seen = registry.get_family(name), set()

    @hypothesis.settings(max_examples=15, database=None, derandomize=True, deadline=None,
                         suppress_health_check=list(hypothesis.HealthCheck))
    @hypothesis.given(cases=draws.checked_cases(family, 4))
    def prop(cases):
        if cases[0].dtype == "float32":
            seen.update(c.logit_scale for c in cases)

    prop()
    return seen


@pytest.mark.parametrize("name", ["splash", "sdpa"])
def test_splash_and_sdpa_draw_other_logit_scales_too(name):
    assert len(_float32_logit_scales_drawn(name)) > 1
