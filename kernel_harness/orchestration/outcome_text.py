"""The text of a property's outcome, one rendering for every front end: its verdict and
its failure report (harness reports, crash reports grouped by kind, other errors), never
Hypothesis's own internals."""

from __future__ import annotations

import functools
import traceback
from collections.abc import Callable
from typing import Any

from hypothesis.errors import FailedHealthCheck, Unsatisfiable

from kernel_harness.checks import flaky
from kernel_harness.checks.claimed_sizes import GhostBranch
from kernel_harness.checks.lowering import LoweringFailure
from kernel_harness.checks.metamorphic import MetamorphicFailure
from kernel_harness.checks.properties import HarnessFailure, PropertyOutcome
from kernel_harness.run import report
from kernel_harness.run.crash import KernelCrash
from kernel_harness.run.runner import impl_name


def leaves(error: BaseException) -> list[BaseException]:
    """The exceptions inside an exception group (or the exception itself)."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for e in error.exceptions for leaf in leaves(e)]
    return [error]


def verdict(outcome: PropertyOutcome) -> str:
    """PASS (``PASS (fallback declared: ...)`` where examples ran the implementation's
    declared fallback); FLAKY when the failure did not recur on the example's replay
    (:mod:`kernel_harness.checks.flaky`); FAIL (with the crash kinds); ERROR when no
    example failed yet the run did not pass (a health check): never "passed 2, failed 1"."""
    obs = outcome.observer
    if outcome.passed and obs.fell_back:
        return (f"PASS (fallback declared: {obs.fallback_declared}; {obs.fell_back} of "
                f"{obs.counted} checks ran fewer Pallas kernels than {obs.expected_kernels})")
    if outcome.passed:
        return "PASS"
    if flaky_of(outcome) is not None:
        return flaky.VERDICT
    if obs.failed == 0 and not obs.crashes:
        return "ERROR"
    kinds = len(obs.crashes)
    return f"FAIL ({kinds} crash kind{'s' * (kinds != 1)})" if kinds else "FAIL"


def detail(outcome: PropertyOutcome) -> str:
    """The verdict line's detail: examples and time, and where the run started with the
    modes cover (:mod:`kernel_harness.checks.modes`), the modes reached and any MISSING."""
    text = f"{outcome.observer.examples} examples, {outcome.wall_seconds:.1f}s"
    cover = outcome.cover
    if cover is not None:
        declared = outcome.modes_declared - len(cover.excluded)
        text += f"; modes {declared - len(cover.missing)}/{declared}"
        if cover.excluded:
            text += f" ({len(cover.excluded)} left out: checked without)"
        if cover.missing:
            text += f", MISSING {', '.join(cover.missing)}"
    return text


def _crash_text(outcome: PropertyOutcome, crashes: list[KernelCrash]) -> list[str]:
    """One report per crash kind (the smallest example Hypothesis found), with a count."""
    obs = outcome.observer
    shown: dict[str, str] = {}
    for leaf in crashes:
        shown[leaf.crash.kind] = str(leaf)
    for kind, (_, crash) in obs.crashes.items():
        shown.setdefault(kind, crash.report())
    lines = []
    for i, (kind, text) in enumerate(shown.items(), 1):
        count = obs.crashes.get(kind, (0, None))[0]
        lines += [f"--- crash kind {i} of {len(shown)}: {kind} ({count} examples) ---", text]
    return lines


def flaky_of(outcome: PropertyOutcome) -> flaky.Flaky | None:
    """The outcome's failure as a :class:`~kernel_harness.checks.flaky.Flaky` when it did
    not recur on the example's replay (its rerun as the replay gave it), else None."""
    error = flaky.flaky_failure(outcome.error)
    if error is None:
        return None
    replayed = None if outcome.shrink is None else outcome.shrink.replayed
    if replayed == "passed":
        last = outcome.observer.last_result
        rerun = flaky.passed_rerun(last if last is not None and last.passed else None)
    elif replayed is not None:
        rerun = f"FAIL differently: {replayed}"
    else:
        first = (str(error).strip().splitlines() or [""])[0]
        rerun = f"did not fail the same way when Hypothesis ran it again ({first})"
    return flaky.Flaky(family=outcome.family, prop=outcome.prop, backend=outcome.backend.name,
                       first=flaky.first_failure(error), rerun=rerun)


def _flaky_text(outcome: PropertyOutcome, found: flaky.Flaky) -> str:
    shrink = outcome.shrink
    lines = [found.report()]
    if shrink is not None and shrink.failed:
        lines.append(f"  the case shown is the failing run's ({shrink.steps} shrink steps in "
                     f"{shrink.seconds:.1f}s ran before the replay; a failure that does not "
                     "recur cannot be shrunk reliably)")
    return "\n".join(lines)


def failure_text(outcome: PropertyOutcome) -> str:
    """The report of a property that did not pass ("" if it passed): each failure's own
    report (summary line first, reproduce command last), crash kinds, other errors; a
    FLAKY one's report (:func:`flaky_of`)."""
    if outcome.passed:
        return ""
    not_recurring = flaky_of(outcome)
    if not_recurring is not None:
        return _flaky_text(outcome, not_recurring)
    obs = outcome.observer
    found = leaves(outcome.error) if outcome.error is not None else []
    # Their messages are reports.
    reported = HarnessFailure | MetamorphicFailure | LoweringFailure | GhostBranch
    failures = [e for e in found if isinstance(e, reported)]
    crashes = [e for e in found if isinstance(e, KernelCrash)]
    others = [e for e in found if not isinstance(e, reported | KernelCrash)]
    lines = [str(f) for f in failures]
    if not failures and obs.last_failure is not None:
        lines.append(report.failure_report(obs.last_failure))
    if crashes or obs.crashes:
        lines += _crash_text(outcome, crashes)
    for err in others:
        if isinstance(err, FailedHealthCheck | Unsatisfiable):  # the draws, not a kernel
            first = (str(err).strip().splitlines() or [""])[0]
            lines.append(f"{report.PREFIX} ERROR {outcome.family}: the strategy gave this "
                         f"property too few usable cases ({obs.examples} ran, {obs.rejected} "
                         f"rejected; Hypothesis: {type(err).__name__}: {first})")
            continue
        lines.append(f"{report.PREFIX} ERROR {outcome.family}: {type(err).__name__}: {err}")
        lines.append("".join(traceback.format_exception(err, limit=-3)).rstrip())
    if outcome.shrink is not None and outcome.shrink.failed:
        lines.append(f"  {outcome.shrink.describe()}")
    return "\n".join(lines)


def impl_label(impl: Callable[..., Any]) -> str:
    """How reports name an implementation that was passed as an object: ``module:qualname``,
    marked when that path cannot be imported back (a factory's product, a lambda)."""
    while isinstance(impl, functools.partial):
        impl = impl.func
    name = impl_name(impl)
    return name if "<" not in name else f"{name} (not importable as MODULE:ATTR)"
