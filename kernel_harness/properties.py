"""Properties written once over the family registry; pytest and the CLI both run them.

A property is a plain Hypothesis test function built for one family, one
backend and one implementation. :class:`Observer` records what the examples
reached (events), how many ran, and the last failing result, so the CLI can
print a summary table and the failure detail.
"""

from __future__ import annotations

import collections
import dataclasses
import time
from collections.abc import Callable
from typing import Any

import hypothesis
from hypothesis import given

from kernel_harness.backends import Backend
from kernel_harness.diagnostics import TpuInterpretCannotRun, note_cannot_run
from kernel_harness.family import Family
from kernel_harness.report import failure_report
from kernel_harness.runner import CaseResult, check_case, ensure_supported


class HarnessFailure(AssertionError):
    """A case whose outputs are outside tolerance; the message is the full report."""

    def __init__(self, result: CaseResult):
        super().__init__(failure_report(result))
        self.result = result


@dataclasses.dataclass
class Observer:
    """Collects what a property run did: examples, events, failures, time."""

    examples: int = 0
    passed: int = 0
    events: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    last_failure: CaseResult | None = None
    last_error: BaseException | None = None
    seconds: float = 0.0

    def record(self, result: CaseResult) -> None:
        self.examples += 1
        self.seconds += result.seconds
        if result.passed:
            self.passed += 1
        else:
            self.last_failure = result


def _note_events(family: Family, case: Any, observer: Observer | None) -> None:
    for label in family.events(case):
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
) -> Callable[[], None]:
    """The property "every output and gradient matches the reference within tolerance".

    Returns a zero-argument Hypothesis test. Settings come from the loaded
    profile unless the caller wraps it in ``hypothesis.settings``.
    """
    ensure_supported(family, backend)

    @given(case=family.cases())
    def prop(case: Any) -> None:
        _note_events(family, case, observer)
        try:
            result = check_case(family, case, backend, impl, impl_spec=impl_spec)
        except TpuInterpretCannotRun as e:
            note_cannot_run(e, observer)
        if observer is not None:
            observer.record(result)
        if not result.passed:
            raise HarnessFailure(result)

    prop.__name__ = f"{family.name}_matches_reference"
    return prop


@dataclasses.dataclass(frozen=True, kw_only=True)
class PropertyOutcome:
    """What running one property under a profile produced."""

    family: str
    prop: str
    backend: Backend
    observer: Observer
    error: BaseException | None
    wall_seconds: float

    @property
    def passed(self) -> bool:
        return self.error is None


def run_property(
    name: str,
    family: Family,
    prop: Callable[[], None],
    *,
    backend: Backend,
    observer: Observer,
    profile: hypothesis.settings,
    max_examples: int | None = None,
    seed: int | None = None,
) -> PropertyOutcome:
    """Runs a property outside pytest and captures (never swallows) its failure."""
    overrides: dict[str, Any] = {}
    if max_examples is not None:
        overrides["max_examples"] = max_examples
    elif hasattr(prop, "kh_example_fraction"):  # metamorphic properties run fewer examples
        overrides["max_examples"] = _metamorphic.example_cap(prop, profile.max_examples)
    if seed is not None:
        overrides["derandomize"] = False
    test = hypothesis.settings(profile, **overrides)(prop)
    if seed is not None:
        test = hypothesis.seed(seed)(test)
    start = time.perf_counter()
    error: BaseException | None = None
    try:
        test()
    except Exception as e:  # noqa: BLE001 - every failure is reported, none hidden
        error = e
    return PropertyOutcome(
        family=family.name,
        prop=name,
        backend=backend,
        observer=observer,
        error=error,
        wall_seconds=time.perf_counter() - start,
    )


#: Property name -> builder; metamorphic properties register here too.
PROPERTIES: dict[str, Callable[..., Callable[[], None]]] = {
    "matches-reference": matches_reference,
}

# Metamorphic properties (no reference needed) and the TPU lowering check register here.
from kernel_harness import lowering as _lowering  # noqa: E402
from kernel_harness import metamorphic as _metamorphic  # noqa: E402

PROPERTIES.update(_metamorphic.PROPERTIES)
PROPERTIES["lowers-for-tpu"] = _lowering.lowers_for_tpu
