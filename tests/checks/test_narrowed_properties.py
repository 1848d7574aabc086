"""Every property of a narrowed family either runs, SKIPs with a reason or fails with the
harness's report (issue 56): with ``--without`` a property whose cases are all gone (segment
isolation without segments, GQA = MHA without GQA) is a SKIP saying so, never a Hypothesis
health-check traceback; a health check that still ends a run is one harness line. Every
property of every built-in family without each of its optional features:
``test_without_walk.py``."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import strategies as st
from hypothesis.errors import FailedHealthCheck

from kernel_harness import resolve_backend
from kernel_harness.checks.properties import PROPERTIES, PropertyOutcome, build_property
from kernel_harness.core.errors import PropertyNotApplicable
from kernel_harness.orchestration.outcome_text import failure_text
from kernel_harness.records.narrow import narrow
from kernel_harness.records.registry import get_family
from kernel_harness.records.relations import Relation, Variant
from tests.helpers import toy_narrow

BACKEND = resolve_backend("interpret")


@pytest.mark.parametrize(("name", "feature", "prop", "why"), [
    ("flash", "segments", "segment-isolation", "without segments has segment ids"),
    ("sdpa", "gqa", "gqa-equals-mha", "without gqa shares kv heads"),
])
def test_a_property_with_nothing_left_is_a_skip_saying_why(name: str, feature: str, prop: str,
                                                           why: str) -> None:
    with pytest.raises(PropertyNotApplicable, match=why):
        PROPERTIES[prop](narrow(get_family(name), {feature}), backend=BACKEND)
    PROPERTIES[prop](get_family(name), backend=BACKEND)  # un-narrowed it builds


def _long_only(variant_when_long):
    """toyopt with an op relation that says something of length-8 cases only."""
    relation = Relation(name="long-only", doc="Length-8 cases only.",
                        variant=lambda case, inputs, draw: None if case.length == 4
                        else variant_when_long(case, inputs, draw))
    return dataclasses.replace(toy_narrow.FAMILY, relations=(relation,))


def _same(case, inputs, draw) -> Variant:
    return Variant(case=case, inputs=inputs, expected=lambda out: out)


def test_an_op_relation_with_no_variant_left_is_a_skip_saying_why() -> None:
    """Without ``long`` the relation has no case: a SKIP when it is built, where every
    example would have been rejected and the run ended in ``FailedHealthCheck``."""
    family = _long_only(_same)
    with pytest.raises(PropertyNotApplicable, match="none of 30 cases drawn without long gives "
                                                    "long-only a variant"):
        build_property("long-only", narrow(family, {"long"}), backend=BACKEND)
    build_property("long-only", family, backend=BACKEND)  # un-narrowed it builds


def test_the_reach_probe_draws_what_the_relation_draws() -> None:
    """A relation that decides with a drawn value (a variant for some draws only) is
    reached by a narrowed family that keeps its cases: the probe gives it a working draw."""
    def sometimes(case, inputs, draw):
        return _same(case, inputs, draw) if draw(st.booleans(), label="apply") else None

    family = narrow(dataclasses.replace(_long_only(sometimes), optional={"long": "length 8",
                                                                         "other": "nothing"}),
                    {"other"})
    assert family.without == {"other"}
    build_property("long-only", family, backend=BACKEND)


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
