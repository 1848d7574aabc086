"""``--shrink-budget SECONDS/STEPS`` (``check``), ``--kh-shrink-budget`` (pytest) and
``testing.check(shrink_budget=...)``: the session shrinks under the budget given instead of
the profile's; ``0`` reports the first failing example as found, saying it is not minimal;
a malformed budget is a usage error that says what to write."""

from __future__ import annotations

import shlex

import pytest

from kernel_harness import cli, testing
from kernel_harness.core.errors import UsageError
from kernel_harness.records import registry
from kernel_harness.run.profiles import SHRINK_BUDGETS, ShrinkBudget

#: Off by 1% at length 8 only: the first failing example has a data seed Hypothesis would
#: shrink towards 0, so there is shrinking to skip.
BUG = "tests.helpers.toy_impls:wrong_at_length_8"


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(registry.BUILTIN_FAMILIES, "toy", "tests.helpers.toy_family:FAMILY")


def _check(capsys, *extra):
    code = cli.main(["check", "--no-isolate", "toy", "--profile", "dev", "--seed", "1",
                     "--max-examples", "20", "--property", "matches-reference", "--impl", BUG,
                     *extra])
    return code, capsys.readouterr()


def test_budget_zero_reports_the_first_failure_unshrunk(toy, capsys):
    code, out = _check(capsys, "--shrink-budget", "0")
    assert code == 1, out.out
    assert "shrink budget 0s / 0 steps" in out.out
    assert ("shrinking stopped: the 0 steps budget ran out after 0 shrink steps" in out.out
            and "NOT necessarily minimal" in out.out), out.out
    # The example reported is the first failing one, and its command replays it.
    first = out.out.split("--- first failing example")[1].split("===")[0]
    final = out.out.split("=== toy / matches-reference FAILED")[1]
    command = next(line.split("reproduce: ")[1] for line in first.splitlines()
                   if "reproduce: kernel-harness repro" in line)
    assert command in final
    assert cli.main(shlex.split(command)[1:]) == 1


def test_a_given_budget_replaces_the_profiles(toy, capsys):
    code, out = _check(capsys, "--shrink-budget", "60/1")
    assert code == 1 and "shrink budget 60s / 1 steps" in out.out, out.out
    assert "the 1 steps budget ran out after 1 shrink steps" in out.out, out.out
    dev = SHRINK_BUDGETS["dev"]
    code, out = _check(capsys)
    assert f"shrink budget {dev}" in out.out


@pytest.mark.parametrize("bad", ["30", "a/b", "-1/3", "1/2.5", "inf/3"])
def test_a_malformed_budget_is_a_usage_error(toy, capsys, bad):
    with pytest.raises(SystemExit) as exit_:
        _check(capsys, f"--shrink-budget={bad}")
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--shrink-budget" in err and "shrink budget" in err, err
    with pytest.raises(ValueError, match="shrink budget"):
        ShrinkBudget.parse(bad)
    with pytest.raises(UsageError, match="SECONDS/STEPS|finite"):
        testing.check("toy", shrink_budget=bad)


def test_parse():
    assert ShrinkBudget.parse("0") == ShrinkBudget(0, 0)
    assert ShrinkBudget.parse("30/40") == ShrinkBudget.parse(" 30s / 40 ") == ShrinkBudget(30, 40)


def test_testing_check_takes_a_budget(toy):
    with pytest.raises(testing.HarnessCheckFailed) as failed:
        testing.check("toy", impl=BUG, properties=["matches-reference"], seed=1,
                      max_examples=20, shrink_budget="0")
    assert "the 0 steps budget ran out" in str(failed.value)
