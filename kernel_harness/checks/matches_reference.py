"""The ``matches-reference`` property: the kernel's outputs and gradients against the
family's independent reference, judged per output; and the :class:`Observer` that
records what a property run did (examples, events, last failure)."""

from __future__ import annotations

import collections
import dataclasses
import math
from collections.abc import Callable
from typing import Any

import hypothesis
from hypothesis import given

from kernel_harness.checks import aimed
from kernel_harness.checks.draws import check_draws_per_compile, checked_cases
from kernel_harness.core.backends import Backend
from kernel_harness.records.family import Family
from kernel_harness.run import kernel_coverage
from kernel_harness.run.crash import Crash, KernelCrash
from kernel_harness.run.diagnostics import TpuInterpretCannotRun, note_cannot_run
from kernel_harness.run.impl_source import SUSPICIOUS
from kernel_harness.run.kernel_eager import EAGER, EAGER_SAME, EAGER_UNSTABLE
from kernel_harness.run.kernel_outside import OUTSIDE
from kernel_harness.run.kernel_poison import UNUSED
from kernel_harness.run.report import failure_report
from kernel_harness.run.rerun import NONDETERMINISTIC
from kernel_harness.run.runner import CaseResult, check_case, ensure_supported, impl_name


class HarnessFailure(AssertionError):
    """A case whose outputs are outside tolerance; the message is the full report."""

    def __init__(self, result: CaseResult):
        super().__init__(failure_report(result))
        self.result = result


@dataclasses.dataclass
class Observer:
    """Collects what a property run did: examples that ran (shrinking included), the
    checks they judged, events of those examples, failures, crashes grouped by kind, time.

    An *example* is one Hypothesis example; with ``draws_per_compile`` K it judges up to
    K *checks* (data draws of one static configuration, on the same compiled programs).
    ``compiles`` counts the distinct static configurations judged (each compiles the
    kernel and the reference once in a process). ``rejected`` counts examples the
    property discarded (``assume()``, ``reject()``, a case TPU interpret mode cannot run,
    a draw past Hypothesis's data limit): they are neither passed nor failed."""

    examples: int = 0
    passed: int = 0
    checks: int = 0
    rejected: int = 0
    events: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    last_failure: CaseResult | None = None
    #: The last judged draw, passing or not (a flaky failure's passing rerun, issue 55).
    last_result: CaseResult | None = None
    last_error: BaseException | None = None
    seconds: float = 0.0
    #: crash kind -> (examples that crashed that way, the latest such crash: after
    #: shrinking, the smallest).
    crashes: dict[str, tuple[int, Crash]] = dataclasses.field(default_factory=dict)
    static_keys: set[Any] = dataclasses.field(default_factory=set)
    #: Checks whose Pallas kernels were counted; of them, those below the family's
    #: expectation (``fell_back``), and the fallback the implementation declares.
    counted: int = 0
    fell_back: int = 0
    #: Counted checks with an output no executed kernel wrote (``kernel result unused``).
    unused: int = 0
    #: Counted checks that ran math outside their kernels the family does not allow
    #: (``math outside the kernel``).
    outside: int = 0
    fallback_declared: str | None = None
    #: The family's expectation, as ``KernelExpectation.describe`` words it.
    expected_kernels: str | None = None

    @property
    def failed(self) -> int:
        """Examples that ran and did not pass (wrong outputs or a crash); never a
        rejected one."""
        return self.examples - self.passed

    @property
    def compiles(self) -> int:
        """Distinct static configurations (compiled programs) judged."""
        return len(self.static_keys)

    def record_check(self, case: Any, seconds: float = 0.0) -> None:
        """Counts one judged data draw of ``case`` (and its static configuration)."""
        self.checks += 1
        self.seconds += seconds
        self.static_keys.add(static_identity(case))

    def end_example(self, passed: bool) -> None:
        """Counts one example that ran to a verdict (after its checks)."""
        self.examples += 1
        self.passed += passed

    def record(self, result: CaseResult) -> None:
        """Counts one judged draw; an example's only one (``draws_per_compile`` 1)."""
        self.record_result(result)
        self.end_example(result.passed)

    def record_result(self, result: CaseResult) -> None:
        """Counts one judged draw of an example, keeping it if it failed."""
        self.record_check(result.case, result.seconds)
        if result.kernels is not None:
            self.counted += 1
            self.fell_back += bool(result.fell_back)
            self.unused += bool(result.unused_results)
            self.outside += bool(result.outside_math or result.outside_elementwise)
            self.fallback_declared = result.fallback_declared
            if result.expected_kernels is not None:
                self.expected_kernels = result.expected_kernels.describe()
        self.last_result = result
        if not result.passed:
            self.last_failure = result

    def record_crash(self, crash: Crash) -> None:
        """Counts one example whose implementation raised (on its last check)."""
        self.record_check(crash.case)
        self.end_example(False)
        count, _ = self.crashes.get(crash.kind, (0, crash))
        self.crashes[crash.kind] = (count + 1, crash)


def static_identity(case: Any) -> Any:
    """What identifies the compiled programs of ``case``: its type and ``static_key()``."""
    key = case.static_key() if hasattr(case, "static_key") else case
    try:
        hash(key)
    except TypeError:
        key = repr(key)
    return (type(case).__name__, key)


def _note_events(family: Family, case: Any, observer: Observer | None) -> None:
    for label in family.events(case):
        hypothesis.event(label)
        if observer is not None:
            observer.events[label] += 1


#: The label of the ``hypothesis.target`` observation made by ``matches-reference``.
TARGET_LABEL = "worst error / tolerance"
#: Where a non-finite ratio (NaN, inf: a kernel NaN) is clamped to (``target`` wants finite).
TARGET_CAP = 1e6


def worst_ratio(result: CaseResult) -> float:
    """The largest ``error / tolerance`` over the outputs of ``result``
    (``Verdict.usage``): the global relative error and the worst slice's, each over the
    output's ``max_rel_err``, or the calibrated judge's usage of its bound. Above 1 is
    a failure; a NaN or infinite error gives :data:`TARGET_CAP`."""
    worst = 0.0
    for v in result.verdicts:
        ratio = v.usage
        worst = max(worst, TARGET_CAP if not math.isfinite(ratio) else min(ratio, TARGET_CAP))
    return worst


def _judge(family: Family, case: Any, backend: Backend, impl: Callable[..., Any] | None,
           impl_spec: str | None, observer: Observer | None,
           reran: set[Any] | None = None) -> CaseResult:
    """One case against the reference, its events noted; a crash is recorded and raised as
    :class:`KernelCrash` (TPU interpret mode's cannot-run is noted and re-raised). The
    first case of each static configuration not yet in ``reran`` is rerun bitwise
    (:mod:`kernel_harness.run.rerun`) and added."""
    key = static_identity(case)
    again = reran is not None and key not in reran
    try:
        result = check_case(family, case, backend, impl, impl_spec=impl_spec, rerun=again)
        if again:
            reran.add(key)
            if not family.nondeterministic:
                hypothesis.event("bitwise rerun")
    except TpuInterpretCannotRun as e:
        note_cannot_run(e, observer)
        raise
    except Exception as e:  # noqa: BLE001 - a crash is a failure, reported as one
        crash = Crash(
            family=family.name, case=case, backend=backend,
            impl=impl_name(family.kernel if impl is None else impl, impl_spec),
            impl_spec=impl_spec,
            adjustments=family.adjustments, error=e,
        )
        _note_events(family, case, observer)  # it ran, up to the crash
        if observer is not None:
            observer.record_crash(crash)
        raise KernelCrash(crash) from e
    _note_events(family, case, observer)
    _note_kernels(result, observer)
    return result


#: One case judged as matches-reference judges it (crash report, events, kernel count),
#: for the properties that run real cases of their own (``large-sizes``).
judge_case = _judge


def _note_kernels(result: CaseResult, observer: Observer | None) -> None:
    """The example's kernel count as events: ``pallas kernels: fwd 1, bwd 2``, and
    ``fallback: fwd`` (or ``bwd``) for a pass below the family's expectation, and
    ``kernel result unused: output `result``` for an output no executed kernel wrote,
    ``math outside the kernel: exp, reduce_sum (forward)`` for disallowed math outside,
    ``kernel poisoning judged nothing: <why>`` where the unused-result check could not run,
    ``kernel core by value not judged: <why>`` where the declared core could not be."""
    labels = [f"{SUSPICIOUS}: {f.kind}" for f in result.suspicious_source]
    labels += list(result.accepted_source)
    if result.kernels is None:
        _events(labels, observer)
        return
    labels += [result.kernels.event()] + [f"fallback: {p}" for p in result.fell_back]
    labels += [f"{UNUSED}: {u}" for u in result.unused_results]
    labels += [f"{NONDETERMINISTIC}: {c.split(':')[0]}" for c in result.rerun_changed]
    labels += [f"{EAGER}: {c.split(':')[0]}" for c in result.eager_changed]
    if result.kernels.eager is not None and not result.eager_changed:
        labels.append(EAGER_SAME)
    if result.kernels.eager is not None and result.kernels.eager.unstable:
        labels.append(EAGER_UNSTABLE)
    labels += [f"{OUTSIDE}: {', '.join(names)} ({where})"
               for where, names in (*result.outside_math.items(),
                                    *result.outside_elementwise.items())]
    if result.kernels.poison_error:  # never silent: the unused-result check did not run
        labels.append(f"kernel poisoning judged nothing: {result.kernels.poison_error}")
    if result.kernels.core_skipped:  # never silent: the core was not judged by value
        labels.append(f"kernel core by value not judged: {result.kernels.core_skipped}")
    _events(labels, observer)


def _events(labels: list[str], observer: Observer | None) -> None:
    for label in labels:
        hypothesis.event(label)
        if observer is not None:
            observer.events[label] += 1


def matches_reference(
    family: Family,
    *,
    backend: Backend,
    impl: Callable[..., Any] | None = None,
    impl_spec: str | None = None,
    observer: Observer | None = None,
    draws_per_compile: int = 1,
) -> Callable[[], None]:
    """The property "every output and gradient matches the reference within tolerance".

    Returns a zero-argument Hypothesis test that first tries the family's
    ``seed_cases`` (explicit examples), then draws. Settings come from the loaded
    profile unless the caller wraps it in ``hypothesis.settings``. With
    ``draws_per_compile`` K > 1 each drawn example judges K cases of one static
    configuration (:mod:`kernel_harness.checks.draws`) on the same compiled programs,
    stopping at the first that fails; explicit examples judge their one case.
    """
    ensure_supported(family, backend)
    reran: set[Any] = set()  # the configurations rerun bitwise in this property's run
    if check_draws_per_compile(draws_per_compile) > 1:
        return _with_draws(family, backend=backend, impl=impl, impl_spec=impl_spec,
                           observer=observer, k=draws_per_compile, reran=reran)

    @given(case=family.cases())
    def prop(case: Any) -> None:
        snapshot = kernel_coverage.steering_snapshot()
        result = _judge(family, case, backend, impl, impl_spec, observer, reran)
        kernel_coverage.steer(snapshot)
        # Guides the search towards the worst case (Phase.target is on in the profiles).
        hypothesis.target(worst_ratio(result), label=TARGET_LABEL)
        if observer is not None:
            observer.record(result)
        if not result.passed:
            raise HarnessFailure(result)

    prop.__name__ = f"{family.name}_matches_reference"
    prop.kh_aimed = tuple(aimed.cases(family, impl, backend))
    for case in (*prop.kh_aimed, *family.seed_cases(family.without)):
        prop = hypothesis.example(case=case)(prop)
    prop.kh_example = lambda case: hypothesis.example(case=case)
    return prop


def _with_draws(family: Family, *, backend: Backend, impl: Callable[..., Any] | None,
                impl_spec: str | None, observer: Observer | None, k: int,
                reran: set[Any]) -> Callable[[], None]:
    """``matches_reference`` judging ``k`` data draws per example."""

    def judge_one(case: Any) -> CaseResult:
        result = _judge(family, case, backend, impl, impl_spec, observer, reran)
        if observer is not None:
            observer.record_result(result)
        return result

    def run_draws(cases: tuple[Any, ...], snapshot: kernel_coverage.Snapshot | None) -> None:
        worst, failed = 0.0, None
        for case in cases:
            result = judge_one(case)
            worst = max(worst, worst_ratio(result))
            if not result.passed:
                failed = result
                break
        hypothesis.target(worst, label=TARGET_LABEL)
        kernel_coverage.steer(snapshot)
        if observer is not None:
            observer.end_example(failed is None)
        if failed is not None:
            raise HarnessFailure(failed)

    @given(cases=checked_cases(family, k))
    def prop(cases: tuple[Any, ...]) -> None:
        snapshot = kernel_coverage.steering_snapshot()
        run_draws(cases, snapshot)

    prop.__name__ = f"{family.name}_matches_reference"
    prop.kh_draws_per_compile = k
    prop.kh_aimed = tuple(aimed.cases(family, impl, backend))
    for case in (*prop.kh_aimed, *family.seed_cases(family.without)):
        prop = hypothesis.example(cases=(case,))(prop)
    prop.kh_example = lambda case: hypothesis.example(cases=(case,))
    return prop
