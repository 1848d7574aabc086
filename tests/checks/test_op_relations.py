"""Op relations (spec.relations.Relation) run as properties of their own name: they pass
on a correct kernel, fail with a replayable report on a planted bug, and a family without
the relation reports it as not applicable, never as a pass."""

from __future__ import annotations

import dataclasses

import hypothesis
import numpy as np
import pytest
from hypothesis import strategies as st

from kernel_harness.checks.metamorphic import MetamorphicFailure
from kernel_harness.checks.metamorphic.repro import replay
from kernel_harness.checks.properties import Observer, build_property, properties_of
from kernel_harness.core.backends import resolve_backend
from kernel_harness.core.errors import PropertyNotApplicable
from kernel_harness.records.relations import Relation, Variant
from tests.helpers import toy_family

INTERPRET = resolve_backend("interpret")


def _reversal(case, inputs, draw):
    return Variant(case=case, inputs={k: v[::-1].copy() for k, v in inputs.items()},
                   expected=lambda base: {k: v[::-1] for k, v in base.items()},
                   note="every input reversed")


def _local(case, inputs, draw):
    i = draw(st.integers(0, case.length - 1), label="perturbed element")
    moved = dict(inputs)
    moved["x"] = inputs["x"].copy()
    moved["x"][i] += np.float32(1.5)
    keep = np.arange(case.length) != i
    return Variant(case=case, inputs=moved, expected=lambda base: base,
                   compared={"y": keep, "dx": keep}, exact=True,
                   note=f"x[{i}] moved by 1.5")


RELATIONS = (
    Relation(name="reversal-equivariant", doc="Reversing x reverses y and dx.",
             variant=_reversal, fraction=1.0),
    Relation(name="elementwise", doc="Moving one element changes no other element.",
             variant=_local, fraction=1.0),
)
TOY = dataclasses.replace(toy_family.FAMILY, relations=RELATIONS)


def coupled_softplus(x):
    """Planted: every element reads the sum of all (not elementwise)."""
    return toy_family.softplus(x) + 1e-3 * x.sum()


def _run(name, impl=None, max_examples=6):
    """Runs relation ``name`` on the toy without shrinking: these tests are about a relation
    catching a bug and replaying what it reports. Hypothesis's unbounded shrinking of a
    failure cost 13-17 s a test here (a toy compile per candidate length); shrinking under
    the profiles' budgets, metamorphic draws included, has tests of its own
    (tests/checks/test_shrinking.py, test_metamorphic_replay.py, cli/test_crash_everywhere.py)."""
    observer = Observer()
    prop = build_property(name, TOY, backend=INTERPRET, impl=impl, observer=observer)
    hypothesis.settings(max_examples=max_examples, database=None, deadline=None,
                        derandomize=True, phases=NO_SHRINK)(prop)()
    return observer


NO_SHRINK = (hypothesis.Phase.explicit, hypothesis.Phase.reuse, hypothesis.Phase.generate)


def test_relations_are_properties_of_the_family():
    names = properties_of(TOY)
    assert names[-2:] == ("reversal-equivariant", "elementwise")
    assert "matches-reference" in names


@pytest.mark.parametrize("name", ["reversal-equivariant", "elementwise"])
def test_relation_passes_on_the_correct_kernel(name):
    observer = _run(name)
    assert observer.examples >= 1 and observer.failed == 0


def test_reversal_fails_on_a_last_element_bug_and_replays():
    with pytest.raises(MetamorphicFailure) as info:
        _run("reversal-equivariant", impl=toy_family.wrong_softplus)
    text = str(info.value)
    assert "FAIL toy reversal-equivariant" in text and "reproduce:" in text
    draws = text.split("--draws ")[-1].strip().strip("'")
    with pytest.raises(MetamorphicFailure):
        replay(TOY, "reversal-equivariant", info.value.case, INTERPRET, draws,
               impl=toy_family.wrong_softplus)


def test_elementwise_is_bitwise_and_catches_coupling():
    with pytest.raises(MetamorphicFailure, match="bitwise"):
        _run("elementwise", impl=coupled_softplus)


def test_a_family_without_the_relation_is_not_applicable():
    with pytest.raises(PropertyNotApplicable, match="relation of another op"):
        build_property("elementwise", toy_family.FAMILY, backend=INTERPRET)


def test_relation_names_must_not_shadow_builtin_properties():
    clash = dataclasses.replace(TOY, relations=(dataclasses.replace(
        RELATIONS[0], name="deterministic"),))
    with pytest.raises(ValueError, match="built-in"):
        properties_of(clash)


def test_deterministic_runs_on_a_family_without_hooks():
    assert toy_family.FAMILY.metamorphic is None
    observer = _run("deterministic", max_examples=2)
    assert observer.examples >= 1 and observer.failed == 0
