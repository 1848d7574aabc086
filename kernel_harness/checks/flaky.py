"""The FLAKY verdict: a failure that does not recur when its example runs again.

Hypothesis runs the failing example it reports once more (the final replay), and while it
searches it may run an example's choices again; when such a run does not fail the same way
it raises ``FlakyFailure``, an exception group holding the first run's failure. That is a
verdict of its own, reported like any failure rather than as Hypothesis's traceback: one
line first naming it FLAKY, the failing run's report, what the run again gave, and the
command that replays the example. ``kernel-harness repro`` runs a failing example a second
time and reports a second run that passes the same way (:class:`FlakyExample`).

``FlakyStrategyDefinition`` (the data drawn differently by a rerun: the strategy's fault, or
a search interrupted while drawing) is no such verdict: it is not a ``FlakyFailure``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis.errors import FlakyFailure

from kernel_harness.checks.matches_reference import HarnessFailure
from kernel_harness.checks.metamorphic.machinery import MetamorphicFailure
from kernel_harness.run.crash import KernelCrash
from kernel_harness.run.report import PREFIX
from kernel_harness.run.runner import CaseResult

#: The verdict, as the summary table, the JSON results and the reports name it.
VERDICT = "FLAKY"
#: What the run again gave when it passed (:attr:`Flaky.rerun`).
PASSED = "PASS"

_REPORTED = (HarnessFailure, MetamorphicFailure, KernelCrash)
#: Lines of the failing run's report that the FLAKY report gives once, at its end.
_OWN_LINES = ("reproduce:", "export:")


def flaky_failure(error: BaseException | None) -> FlakyFailure | None:
    """``error`` when it is Hypothesis's ``FlakyFailure`` (a failure that did not recur),
    else None (with ``report_multiple_bugs`` a group of several failures, flaky ones among
    them, is a FAIL: the others recur)."""
    return error if isinstance(error, FlakyFailure) else None


def first_failure(flaky: BaseExceptionGroup) -> BaseException:
    """The failing run's exception inside ``flaky``: the first one the harness reports
    (a comparison's, a relation's, a crash), else the first."""
    found: list[BaseException] = []
    todo: list[BaseException] = [flaky]
    while todo:
        e = todo.pop(0)
        if isinstance(e, BaseExceptionGroup):
            todo[:0] = list(e.exceptions)
        else:
            found.append(e)
    return next((e for e in found if isinstance(e, _REPORTED)), found[0] if found else flaky)


def passed_rerun(result: CaseResult | None = None) -> str:
    """The outcome of a run again that passed: ``PASS``, with each output's error and
    tolerance where the run was a comparison with the reference (``result``)."""
    if result is None:
        return f"{PASSED} (the property held on the same example)"
    outputs = ", ".join(f"{v.stats.output} max rel err {v.stats.max_rel_err:.3g} "
                        f"(tolerance {v.tolerance.max_rel_err:.3g})" for v in result.verdicts)
    return f"{PASSED} (every output within its tolerance: {outputs})"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Flaky:
    """An example that failed once and did not fail the same way when it ran again."""

    family: str
    prop: str
    backend: str
    #: What the failing run raised (a HarnessFailure, MetamorphicFailure or KernelCrash).
    first: BaseException
    #: What the run again gave: :func:`passed_rerun`, or the summary line of another failure.
    rerun: str

    @property
    def case(self) -> Any:
        """The failing example's case (None when the failure names none)."""
        e = self.first
        if isinstance(e, HarnessFailure):
            return e.result.case
        if isinstance(e, KernelCrash):
            return e.crash.case
        return getattr(e, "case", None)

    @property
    def impl(self) -> str:
        """How the failing run's report names the implementation."""
        e = self.first
        if isinstance(e, HarnessFailure):
            return e.result.impl
        if isinstance(e, KernelCrash):
            return e.crash.impl
        return str(getattr(e, "impl", ""))

    @property
    def repro(self) -> str | None:
        """The command that replays the example (its report's ``reproduce:``), or None
        when it cannot be replayed."""
        for line in str(self.first).splitlines():
            text = line.strip().removeprefix("reproduce:").strip()
            if line.strip().startswith("reproduce:") and text.startswith("kernel-harness "):
                return text
        return None

    def first_line(self) -> str:
        """``[kernel-harness] FLAKY gpu-softmax deterministic float32 rows=... backend=...:
        failed, then passed when the same example ran again: ...``."""
        case = self.case
        describe = getattr(case, "shape_summary", None)
        where = " ".join(filter(None, [getattr(case, "dtype", ""),
                                       describe() if callable(describe) else ""]))
        then = ("then passed when the same example ran again: the failure does not recur"
                if self.rerun.startswith(PASSED) else
                "then did not fail the same way when the same example ran again")
        return (f"{PREFIX} {VERDICT} {self.family} {self.prop} {where} "
                f"backend={self.backend}: the example failed, {then}").replace("  ", " ")

    def failing_run(self) -> list[str]:
        """The failing run's report, without the lines the FLAKY report gives itself."""
        return [line for line in str(self.first).splitlines()
                if not line.strip().startswith(_OWN_LINES)]

    def report(self) -> str:
        """The FLAKY report: its line, both runs' outcomes, the reproduce command."""
        failing = self.failing_run()
        lines = [self.first_line(), f"  failing run: {failing[0] if failing else '?'}",
                 *(f"  {line}" for line in failing[1:]),
                 f"  run again:   {self.rerun}"]
        repro = self.repro
        lines.append(f"  reproduce: {repro}" if repro is not None else
                     "  reproduce: not replayable (the failing run's report says why)")
        return "\n".join(lines)

    def summary(self) -> list[str]:
        """The FLAKY line, then the failing run's summary lines (those naming a failure)."""
        return [self.first_line(), *(line for line in self.failing_run()
                                     if line.startswith(PREFIX))]


class FlakyExample(AssertionError):
    """A replayed example that failed and then passed when it ran again; the message is
    its FLAKY report."""

    def __init__(self, flaky: Flaky):
        super().__init__(flaky.report())
        self.flaky = flaky

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.flaky,))


__all__ = ["PASSED", "VERDICT", "Flaky", "FlakyExample", "first_failure", "flaky_failure",
           "passed_rerun"]
