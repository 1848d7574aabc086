"""Issue 56: no property ends in a raw Hypothesis error on a built-in family with ``--without``
of any of its optional features. For every family and feature, every property is built as
``check`` builds it and its draws are run under the ``ci`` profile's settings with the
kernel stubbed out (:mod:`tests.helpers.property_walk`): each either SKIPs with a reason
or draws its cases (and everything its body draws before the kernel) without a
``FailedHealthCheck``, ``Unsatisfiable``, ``InvalidArgument`` or any other error.

Per push: at most 2 examples a property (the first is Hypothesis's simplest draw, the second
a pseudo-random one, fixed by ci's derandomize): a property whose cases are all, or nearly
all, rejected still meets Hypothesis's 50-rejections health check before its second usable
case; every case "lowers" unseen. About 30 worker-seconds on this project's 2-core machine
(2026-12-05). Nightly: each property's own example count under ``ci`` (Hypothesis's health
checks watch the first 10 usable examples), lowering for real, the un-narrowed families
too: about 190 worker-seconds. Not the modes-first cover ``check --profile ci`` starts
matches-reference with: it draws the same narrowed strategy with every health check
suppressed and runs what it drew as explicit examples, which no health check judges (its
own tests: ``test_modes_first.py``); it would add about 170 s.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import strategies as st

from kernel_harness.checks.properties import properties_of
from kernel_harness.records.family import Family
from kernel_harness.records.narrow import narrow
from kernel_harness.records.registry import BUILTIN_FAMILIES, get_family
from tests.helpers import toy_narrow
from tests.helpers.per_push import per_push
from tests.helpers.property_walk import Step, problems, walk, walk_property
from tests.helpers.toy_family import ToyCase

NARROWED = [(name, feature) for name in BUILTIN_FAMILIES
            for feature in sorted(get_family(name).optional)]
#: Examples per property per push (see the module's docstring).
PER_PUSH_EXAMPLES = 2


def _walked(name: str, feature: str | None, **options) -> list[Step]:
    family = get_family(name)
    if "interpret" not in family.backends:
        pytest.skip(f"{name} does not run here (needs {family.requires})")
    family = narrow(family, {feature}) if feature else family
    steps = walk(family, properties_of(family), **options)
    where = f"{name} --without {feature}" if feature else name
    found = problems(steps, where)
    assert not found, "\n".join(found)
    # Not vacuous: the family's cases were drawn up to its kernel.
    assert any(s.reached for s in steps), [(s.prop, s.verdict, s.detail) for s in steps]
    return steps


@pytest.mark.parametrize(("name", "feature"), per_push(NARROWED, family=lambda v: v[0],
                                                   ids=lambda v: f"{v[0]}-{v[1]}"))
def test_every_property_draws_or_skips_without_each_optional_feature(name: str,
                                                                     feature: str) -> None:
    _walked(name, feature, max_examples=PER_PUSH_EXAMPLES)


WHOLE = [(name, None) for name in BUILTIN_FAMILIES] + NARROWED


@pytest.mark.nightly
@pytest.mark.parametrize(("name", "feature"), WHOLE,
                         ids=[f"{n}-{f or 'all'}" for n, f in WHOLE])
def test_every_property_draws_or_skips_as_the_ci_profile_runs_it(name: str,
                                                                 feature: str | None) -> None:
    _walked(name, feature, max_examples=None, lower=True)


# --- the walk itself: what it reports -----------------------------------------------------------


def _toy(cases) -> Family:
    return dataclasses.replace(toy_narrow.FAMILY, cases=cases)


def _lengths(without: frozenset[str]) -> st.SearchStrategy[int]:
    return st.sampled_from([4] if "long" in without else [4, 8])


def test_a_strategy_that_rejects_every_narrowed_case_is_a_health_check_the_walk_reports():
    def cases(without: frozenset[str] = frozenset()):
        return st.builds(ToyCase, dtype=st.just("float32"), seed=st.integers(0, 2**16),
                         length=_lengths(without)).filter(lambda c: "long" not in without)

    assert not problems([walk_property(_toy(cases), "matches-reference")], "toyopt")
    step = walk_property(narrow(_toy(cases), {"long"}), "matches-reference",
                         max_examples=PER_PUSH_EXAMPLES)
    assert step.verdict == "ERROR" and "FailedHealthCheck" in step.detail, step
    assert problems([step], "toyopt --without long")


def test_a_strategy_invalid_once_narrowed_is_reported():
    def cases(without: frozenset[str] = frozenset()):
        length = st.integers(8, 4) if "long" in without else _lengths(without)
        return st.builds(ToyCase, dtype=st.just("float32"), seed=st.integers(0, 2**16),
                         length=length)

    step = walk_property(narrow(_toy(cases), {"long"}), "deterministic",
                         max_examples=PER_PUSH_EXAMPLES)
    assert step.verdict == "ERROR" and "InvalidArgument" in step.detail, step


def test_the_walk_draws_up_to_the_kernel_and_never_runs_it():
    def broken(x):
        raise AssertionError("the walk ran the kernel")

    family = narrow(dataclasses.replace(toy_narrow.FAMILY, kernel=broken), {"long"})
    steps = walk(family, ("matches-reference", "deterministic", "lowers-for-tpu"),
                 max_examples=PER_PUSH_EXAMPLES)
    assert [s.verdict for s in steps] == ["drew", "drew", "SKIP"], steps
    assert all(s.reached == s.examples > 0 for s in steps[:2]), steps
    assert "has no traceable hook" in steps[2].detail, steps[2]
