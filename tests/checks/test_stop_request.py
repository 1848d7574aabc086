"""A request to stop (a signal's interrupt, ``KeyboardInterrupt``) that lands while
Hypothesis draws data comes back wrapped in ``FlakyStrategyDefinition``; ``run_property``
raises the request itself, so the run is INTERRUPTED and no ERROR is reported for the kernel
(CI saw ``2 units finished, 0 interrupted`` after a SIGHUP: the signal landed in a draw)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import strategies as st

from kernel_harness.checks.properties import (
    Observer,
    build_property,
    run_property,
    stop_request_within,
)
from kernel_harness.core.backends import resolve_backend
from kernel_harness.run.profiles import get_profile
from tests.helpers import toy_family, toy_impls

BACKEND = resolve_backend("interpret")


class Stop(BaseException):
    """Stands for the run's interrupt (a BaseException, as ``RunInterrupted`` is)."""


def test_a_stop_request_is_found_through_causes_contexts_and_groups():
    try:
        try:
            raise Stop
        except Stop:
            raise ValueError("wrapped") from None
    except ValueError as e:
        hidden_context = e
    assert stop_request_within(hidden_context) is not None
    assert isinstance(stop_request_within(ExceptionGroup("g", [hidden_context])), Stop)
    assert stop_request_within(ValueError("plain")) is None
    assert stop_request_within(SystemExit(1)) is None  # a kernel's exit is a failure
    assert isinstance(stop_request_within(KeyboardInterrupt()), KeyboardInterrupt)


def test_a_stop_landing_in_a_draw_after_the_first_failure_is_raised_not_reported():
    wrong: list[int] = []

    def impl(x):
        if x.shape[0] == 8:
            wrong.append(1)
        return toy_impls.wrong_at_length_8(x)

    def dtype(name: str) -> str:
        if wrong:  # the signal lands while the next case is drawn (a shrink step, say)
            raise Stop
        return name

    family = dataclasses.replace(
        toy_family.FAMILY,
        cases=lambda: st.builds(toy_family.ToyCase, dtype=st.just("float32").map(dtype),
                                seed=st.integers(0, 2**16), length=st.just(8)))
    observer = Observer()
    prop = build_property("matches-reference", family, backend=BACKEND, impl=impl,
                          observer=observer)
    with pytest.raises(Stop):
        run_property("matches-reference", family, prop, backend=BACKEND, observer=observer,
                     profile=get_profile("ci"), max_examples=4, seed=1)
    assert wrong and observer.last_failure is not None  # what the INTERRUPTED result keeps
