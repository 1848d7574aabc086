"""Replaying one metamorphic example exactly (``kernel-harness repro --property P
--draws JSON``): the failure's case and the values it drew, run once, no search."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import FlakyFailure

from kernel_harness.checks.flaky import Flaky, FlakyExample, first_failure, passed_rerun
from kernel_harness.checks.metamorphic.machinery import Check, applicable
from kernel_harness.checks.metamorphic.op_relations import builtin_names, spec_for
from kernel_harness.checks.metamorphic.replay import Replayer
from kernel_harness.core.backends import Backend
from kernel_harness.records.family import Family
from kernel_harness.run.runner import ensure_supported


def replay(family: Family, prop: str, case: Any, backend: Backend, draws_json: str,
           impl: Callable[..., Any] | None = None, impl_spec: str | None = None) -> Check:
    """Runs metamorphic property ``prop`` once on ``case`` with the recorded draws.

    Returns the check (no problems: the relation held); raises
    :class:`~kernel_harness.checks.metamorphic.MetamorphicFailure` with the same report
    as the original failure when it does not (or the crash's KernelCrash),
    :class:`~kernel_harness.checks.flaky.FlakyExample` when it failed and then held when
    Hypothesis ran it again, ValueError for an unknown property or draws that do not fit it.
    """
    spec = spec_for(family, prop)
    if spec is None:
        known = sorted(builtin_names() | {r.name for r in family.relations})
        raise ValueError(f"unknown metamorphic property {prop!r} of {family.name}; "
                         f"known: {known}")
    ensure_supported(family, backend)
    applicable(family, spec)
    check = Check(family=family, prop=prop, case=case, backend=backend,
                  impl=family.kernel if impl is None else impl, impl_spec=impl_spec,
                  inputs=case.materialize())
    Replayer(draws_json, family.case_type)  # malformed --draws: an error before any run

    # Inside a one-example Hypothesis test, so the bodies' hypothesis.event calls work;
    # nothing is drawn from Hypothesis (the draws come from ``data``).
    @settings(max_examples=1, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(st.none())
    def once(_: None) -> None:
        # Hypothesis runs a failing example again to report it: start over each time.
        data = Replayer(draws_json, family.case_type)
        check.recorder = data  # a failure prints the same reproduce command
        check.problems.clear()
        check.notes.clear()
        check.runs = 0
        spec.body(check, data)
        data.finished()
        check.fail_if_problems()

    try:
        once()
    except FlakyFailure as e:
        raise FlakyExample(Flaky(family=family.name, prop=prop, backend=backend.name,
                                 first=first_failure(e), rerun=passed_rerun())) from None
    return check
