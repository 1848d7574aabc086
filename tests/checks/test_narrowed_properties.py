"""Every property of a narrowed family either runs, SKIPs with a reason or fails with the
harness's report (issue 56): with ``--without`` a property whose cases are all gone (segment
isolation without segments, GQA = MHA without GQA) is a SKIP saying so, never a Hypothesis
health-check traceback; a health check that still ends a run is one harness line."""

from __future__ import annotations

import pytest
from hypothesis.errors import FailedHealthCheck

from kernel_harness import resolve_backend
from kernel_harness.checks.metamorphic.relations import SPECS
from kernel_harness.checks.properties import PROPERTIES, PropertyOutcome
from kernel_harness.core.backends import BackendUnavailable
from kernel_harness.core.errors import PropertyNotApplicable
from kernel_harness.orchestration.outcome_text import failure_text
from kernel_harness.spec.narrow import narrow
from kernel_harness.spec.registry import BUILTIN_FAMILIES, get_family

BACKEND = resolve_backend("interpret")
REACHED = [s for s in SPECS if s.applies is not None]
NARROWED = [(name, feature) for name in BUILTIN_FAMILIES
            for feature in sorted(get_family(name).optional)]


@pytest.mark.parametrize(("name", "feature"), NARROWED, ids=[f"{n}-{f}" for n, f in NARROWED])
def test_every_narrowed_property_builds_or_skips_with_a_reason(name: str, feature: str) -> None:
    family = narrow(get_family(name), {feature})
    for spec in REACHED:
        try:
            PROPERTIES[spec.name](family, backend=BACKEND)
        except PropertyNotApplicable as e:
            assert str(e), spec.name
        except BackendUnavailable:
            pytest.skip(f"{name} has no interpret backend here")


@pytest.mark.parametrize(("name", "feature", "prop", "why"), [
    ("flash", "segments", "segment-isolation", "without segments has segment ids"),
    ("sdpa", "gqa", "gqa-equals-mha", "without gqa shares kv heads"),
])
def test_a_property_with_nothing_left_is_a_skip_saying_why(name: str, feature: str, prop: str,
                                                           why: str) -> None:
    with pytest.raises(PropertyNotApplicable, match=why):
        PROPERTIES[prop](narrow(get_family(name), {feature}), backend=BACKEND)
    PROPERTIES[prop](get_family(name), backend=BACKEND)  # un-narrowed it builds


def test_a_health_check_is_one_harness_line_not_a_traceback() -> None:
    from kernel_harness.checks.matches_reference import Observer

    obs = Observer()
    obs.rejected = 50
    outcome = PropertyOutcome(family="toy", prop="segment-isolation", backend=BACKEND,
                              error=FailedHealthCheck("It looks like this test is filtering "
                                                      "out a lot of inputs.\nmore"),
                              observer=obs, wall_seconds=1.0)
    text = failure_text(outcome)
    assert text.startswith("[kernel-harness] ERROR toy: the strategy gave this property too "
                           "few usable cases (0 ran, 50 rejected; Hypothesis: "
                           "FailedHealthCheck: It looks like")
    assert "Traceback" not in text and "more" not in text
