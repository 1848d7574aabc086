"""Report first, shrink second: print the first failing example at once, then shrink it
under a budget of time and steps.

Each shrink step of a kernel property may compile a kernel (seconds on CPU interpret), and
Hypothesis allows up to five minutes and 500 successful shrinks per property, with no
setting for less. :func:`bounded_shrinking` wraps a ``@given`` test's
``.hypothesis.inner_test`` (the hook Hypothesis provides for wrapping each call):

- the first failing call hands its one-line summary and replay command to
  ``on_first_failure`` (the CLI prints and flushes it) before Hypothesis starts shrinking;
- every later call is a shrink step; once the budget's seconds or steps are spent, further
  candidates are not run (the wrapper returns without calling the kernel, so Hypothesis sees
  them as passing and keeps the smallest failing example it has actually seen);
- the final replay of the reported example (``is_final``) always runs for real, so the
  reported case and its traceback are genuine.

A test that draws inside its body (``st.data()``: the metamorphic properties, marked
``kh_draws_in_test``) cannot just return: the skipped call would stop drawing where an
earlier run of the same prefix drew on, and Hypothesis raises ``FlakyStrategyDefinition``
("Inconsistent data generation"). Its skipped candidates are marked as having run out
of data instead (an overrun, which Hypothesis discards without checking the draws).

The :class:`ShrinkReport` says whether the shown case is minimal (Hypothesis finished
shrinking within the budget) or the budget ran out.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from typing import Any

import hypothesis
from hypothesis.control import current_build_context
from hypothesis.errors import UnsatisfiedAssumption

from kernel_harness.run.profiles import ShrinkBudget
from kernel_harness.run.report import PREFIX

#: Lines of a failure message that replay or pin down the failing example.
_REPLAY_MARKERS = ("reproduce:", "rerun:", "case json:")


@dataclasses.dataclass
class ShrinkReport:
    """What happened after a property's first failing example."""

    budget: ShrinkBudget | None
    first_failure_seconds: float | None = None  # from the property's start
    first_failure_text: str | None = None
    steps: int = 0  # test calls run while shrinking (the final replay not counted)
    skipped: int = 0  # shrink candidates not run because the budget was spent
    seconds: float = 0.0  # wall time from the first failure to the last shrink step
    exhausted: str | None = None  # "time" or "steps" when the budget ran out
    #: The first failing example was an explicit one (a family's seed case, or a case of the
    #: modes-first cover): Hypothesis reports an explicit example as it is, it never
    #: shrinks one. ``explicit_arguments``: its keyword arguments; ``explicit_origin``: what
    #: it is, in words (the property runner names a cover case).
    explicit: bool = False
    explicit_arguments: dict[str, Any] | None = None
    explicit_origin: str = "one of the family's seed cases"
    #: What Hypothesis's final replay of the reported example gave: ``"passed"``, or the
    #: summary line of how it failed; None when it did not run (a flaky failure found
    #: during the search, :mod:`kernel_harness.checks.flaky`).
    replayed: str | None = None

    @property
    def failed(self) -> bool:
        """Whether any example failed."""
        return self.first_failure_seconds is not None

    def describe(self) -> str:
        """One line: minimal, or the budget ran out (and which part of it)."""
        if not self.failed:
            return "no failing example"
        if self.explicit:
            return (f"not shrunk: the failing example is {self.explicit_origin} (an "
                    "explicit example, which Hypothesis reports as it is and never shrinks); "
                    "the case shown is NOT necessarily minimal")
        spent = f"{self.steps} shrink steps in {self.seconds:.1f}s"
        if self.exhausted is not None:
            b = self.budget
            assert b is not None
            limit = f"{b.seconds:g}s" if self.exhausted == "time" else f"{b.steps} steps"
            return (f"shrinking stopped: the {limit} budget ran out after {spent} "
                    f"({self.skipped} candidates not run); the case shown is the failing "
                    "one the shrinker ranks smallest among those run (by its choice sequence, "
                    "which need not be the smallest shapes: the first failing example is "
                    "printed above), NOT necessarily minimal")
        return (f"shrinking finished within the budget ({spent}): the shrinker "
                "found no smaller failing case (a local minimum of its search, not a proof "
                "that none exists)")


def first_failure_text(error: BaseException, label: str) -> str:
    """The one-line summary (or summaries, one per failing output) and the replay lines of a
    failure; a failure without harness summary lines gets one naming the exception."""
    lines = str(error).splitlines()
    summary = [ln for ln in lines if ln.startswith(PREFIX)]
    if not summary:
        first = lines[0] if lines else ""
        summary = [f"{PREFIX} ERROR {label}: {type(error).__name__}: {first}"]
    replay = [ln for ln in lines if ln.strip().startswith(_REPLAY_MARKERS)]
    return "\n".join(summary + replay)


def _is_final_replay() -> bool:
    context = current_build_context()
    if not hasattr(context, "is_final"):  # a Hypothesis layout this module does not know
        raise RuntimeError(
            f"hypothesis {hypothesis.__version__}: BuildContext has no 'is_final'; "
            "kernel_harness.checks.shrinking cannot tell the final replay from a shrink step"
        )
    return bool(context.is_final)


def bounded_shrinking(
    test: Callable[..., Any],
    *,
    budget: ShrinkBudget | None,
    label: str,
    on_first_failure: Callable[[str], None] | None = None,
    clock: Callable[[], float] = time.perf_counter,
    draws_in_test: bool = False,
) -> tuple[Callable[[], None], ShrinkReport]:
    """Wraps the inner test of the ``@given`` test ``test`` (in place); returns a function
    that restores it and the :class:`ShrinkReport` the wrapped calls fill in. ``budget``
    None leaves shrinking to Hypothesis's own limits (still reported). ``draws_in_test``:
    the test draws inside its body (skipped candidates are overruns, see above)."""
    handle = test.hypothesis  # type: ignore[attr-defined]
    inner = handle.inner_test
    report = ShrinkReport(budget=budget)
    start = clock()
    first: list[float] = []  # clock() at the first failure

    # functools.wraps keeps the inner test's source and signature visible to Hypothesis,
    # which derives the derandomized seed (the ci profile's draws) from them.
    @functools.wraps(inner)
    def guarded(*args: Any, **kwargs: Any) -> None:
        final = _is_final_replay()
        shrinking = bool(first) and not final
        replay = bool(first) and final
        if shrinking:
            if report.exhausted is None and budget is not None:
                if report.steps >= budget.steps:
                    report.exhausted = "steps"
                elif clock() - first[0] >= budget.seconds:
                    report.exhausted = "time"
            if report.exhausted is not None:
                report.skipped += 1
                if draws_in_test:
                    current_build_context().data.mark_overrun()  # raises StopTest
                return
            report.steps += 1
        try:
            inner(*args, **kwargs)
        except UnsatisfiedAssumption:
            raise  # assume()/reject(): Hypothesis draws another example; not a failure
        except Exception as e:
            if not first:
                first.append(clock())
                report.first_failure_seconds = first[0] - start
                report.explicit = final  # only an explicit example's first run is final
                report.explicit_arguments = dict(kwargs) if final else None
                report.first_failure_text = first_failure_text(e, label)
                if on_first_failure is not None:
                    on_first_failure(report.first_failure_text)
            elif replay:
                report.replayed = first_failure_text(e, label).splitlines()[0]
            raise
        else:
            if replay:
                report.replayed = "passed"
        finally:
            if shrinking:
                report.seconds = clock() - first[0]

    def restore() -> None:
        handle.inner_test = inner

    handle.inner_test = guarded
    return restore, report


__all__ = ["ShrinkReport", "bounded_shrinking", "first_failure_text"]
