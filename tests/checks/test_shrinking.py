"""Report first, shrink second: the first failure is handed over before any shrink step,
shrinking stops when its budget of steps or seconds runs out, and the reported example is
one that really failed (the final replay runs for real)."""

from __future__ import annotations

import hypothesis
import pytest
from hypothesis import Phase, given
from hypothesis import strategies as st

from kernel_harness.checks.shrinking import bounded_shrinking, first_failure_text
from kernel_harness.run.profiles import SHRINK_BUDGETS, ShrinkBudget, shrink_budget

SETTINGS = hypothesis.settings(
    max_examples=200, derandomize=True, database=None, deadline=None,
    report_multiple_bugs=False,
    phases=(Phase.explicit, Phase.generate, Phase.shrink),
)


def _failing_test(log: list):
    @SETTINGS
    @given(x=st.integers(0, 10_000))
    def prop(x: int) -> None:
        log.append(("ran", x))
        if x >= 10:
            raise AssertionError(
                f"[kernel-harness] FAIL toy x={x}\n  detail\n  reproduce: rerun {x}")

    return prop


class FakeClock:
    """One second passes per reading."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def _run(budget, clock=None):
    log: list = []
    prop = _failing_test(log)
    kwargs = {} if clock is None else {"clock": clock}
    restore, report = bounded_shrinking(
        prop, budget=budget, label="toy prop",
        on_first_failure=lambda text: log.append(("first", text)), **kwargs,
    )
    with pytest.raises(AssertionError) as info:
        prop()
    restore()
    return log, report, info.value


def test_first_failure_is_reported_before_any_shrink_step():
    log, report, _ = _run(ShrinkBudget(seconds=1e9, steps=10_000))
    firsts = [i for i, entry in enumerate(log) if entry[0] == "first"]
    assert len(firsts) == 1
    failing_runs = [i for i, e in enumerate(log) if e[0] == "ran" and e[1] >= 10]
    assert firsts[0] == failing_runs[0] + 1  # right after the first failing call, once
    text = log[firsts[0]][1]
    assert text.splitlines()[0].startswith("[kernel-harness] FAIL toy x=")
    assert "reproduce: rerun" in text and "detail" not in text
    assert report.exhausted is None and report.steps > 0
    assert "found no smaller failing case" in report.describe()
    assert "NOT" not in report.describe() and "is minimal" not in report.describe()


def test_unbounded_shrinking_reaches_the_minimal_example():
    _, report, error = _run(ShrinkBudget(seconds=1e9, steps=10_000))
    assert "x=10\n" in str(error)
    assert report.skipped == 0


def test_step_budget_stops_shrinking_and_reports_a_real_failure():
    log, report, error = _run(ShrinkBudget(seconds=1e9, steps=3))
    assert report.exhausted == "steps" and report.steps == 3 and report.skipped > 0
    shown = int(str(error).split("x=")[1].split()[0])
    assert shown >= 10 and ("ran", shown) in log  # a case that ran and failed
    first = next(e for e in log if e[0] == "ran" and e[1] >= 10)[1]
    runs_after_first = len(log) - log.index(("ran", first)) - 2  # minus "first" and itself
    assert runs_after_first == 3 + 1  # three shrink steps and the final replay, nothing else
    assert "NOT necessarily minimal" in report.describe() and "3 steps" in report.describe()


def test_time_budget_stops_shrinking():
    _, report, _ = _run(ShrinkBudget(seconds=4, steps=10_000), clock=FakeClock())
    assert report.exhausted == "time" and 0 < report.steps < 10
    assert "budget ran out" in report.describe() and "4s budget" in report.describe()


def test_passing_property_has_no_failure():
    @SETTINGS
    @given(x=st.integers(0, 5))
    def prop(x: int) -> None:
        assert x <= 5

    restore, report = bounded_shrinking(prop, budget=ShrinkBudget(1, 1), label="ok")
    prop()
    restore()
    assert not report.failed and report.describe() == "no failing example"


def test_failure_without_harness_summary_gets_one():
    text = first_failure_text(ValueError("boom\nmore"), "fam prop")
    assert text == "[kernel-harness] ERROR fam prop: ValueError: boom"


def test_profiles_have_budgets_and_stop_at_the_first_bug():
    from kernel_harness.run.profiles import PROFILE_NAMES, get_profile

    for name in PROFILE_NAMES:
        assert shrink_budget(name) is SHRINK_BUDGETS[name]
        assert get_profile(name).report_multiple_bugs is False
    with pytest.raises(ValueError, match="unknown profile"):
        shrink_budget("weekly")
    with pytest.raises(ValueError, match="seconds >= 0"):
        ShrinkBudget(seconds=-1, steps=1)


def test_wrapping_keeps_the_derandomized_draws():
    """Hypothesis seeds derandomized runs from the inner test's source: the wrapper must not
    change which cases the ci profile draws (it did before functools.wraps)."""

    def draws(wrap: bool) -> list[int]:
        seen: list[int] = []

        @hypothesis.settings(SETTINGS, max_examples=10)
        @given(x=st.integers(0, 10**9))
        def prop(x: int) -> None:
            seen.append(x)

        if wrap:
            restore, _ = bounded_shrinking(prop, budget=ShrinkBudget(1, 1), label="p")
        prop()
        if wrap:
            restore()
        return seen

    assert draws(True) == draws(False)


def test_a_rejected_example_is_not_a_first_failure():
    """assume()/reject() is Hypothesis drawing another example, never a failure report."""
    import hypothesis
    from hypothesis import given
    from hypothesis import strategies as st

    from kernel_harness.checks.shrinking import bounded_shrinking

    seen: list[str] = []

    @hypothesis.settings(max_examples=20, database=None, derandomize=True)
    @given(st.integers(0, 10))
    def prop(x: int) -> None:
        hypothesis.assume(x % 2 == 0)

    restore, report = bounded_shrinking(prop, budget=None, label="toy",
                                        on_first_failure=seen.append)
    try:
        prop()
    finally:
        restore()
    assert seen == [] and report.first_failure_text is None


def test_a_failing_seed_case_says_it_is_not_shrunk():
    """Issue 25: a failing explicit example (a family's seed case) is reported as it is;
    the report must not call it minimal ("0 shrink steps ... minimal" for a batch-3,
    length-512 seed case that also fails at length 256)."""

    @SETTINGS
    @hypothesis.example(x=512)
    @given(x=st.integers(0, 10_000))
    def prop(x: int) -> None:
        if x >= 10:
            raise AssertionError(f"[kernel-harness] FAIL toy x={x}")

    restore, report = bounded_shrinking(prop, budget=ShrinkBudget(60, 100), label="toy")
    with pytest.raises(AssertionError, match="x=512"):
        prop()
    restore()
    assert report.explicit and report.steps == 0
    assert "not shrunk" in report.describe() and "NOT necessarily minimal" in report.describe()
    assert "the case shown is minimal" not in report.describe()


def test_a_data_drawing_test_never_turns_a_spent_budget_into_flaky():
    """A test that draws in its body (the metamorphic properties) cannot skip a shrink
    candidate by returning early: Hypothesis raised FlakyStrategyDefinition ("Inconsistent
    data generation"). Skipped candidates are overruns instead; the failure is reported."""

    @SETTINGS
    @given(x=st.integers(0, 10_000), data=st.data())
    def prop(x: int, data: st.DataObject) -> None:
        y = data.draw(st.integers(0, 10_000), label="y")
        if x + y >= 10:
            raise AssertionError(f"[kernel-harness] FAIL toy x={x} y={y}")

    for draws_in_test, expect in ((False, hypothesis.errors.FlakyStrategyDefinition),
                                  (True, AssertionError)):
        restore, report = bounded_shrinking(prop, budget=ShrinkBudget(60, 2), label="toy",
                                            draws_in_test=draws_in_test)
        with pytest.raises(BaseException) as info:  # noqa: PT011 - either kind, checked below
            prop()
        restore()
        assert report.exhausted == "steps"
        found = [info.value, *getattr(info.value, "exceptions", ())]
        assert any(isinstance(e, expect) for e in found), (draws_in_test, info.value)
        if draws_in_test:
            assert "FAIL toy" in str(info.value)
