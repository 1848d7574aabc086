"""Modes first (issue 40), on the toy family: matches-reference in a ci-profile run starts
with examples reaching every declared mode, within the profile's examples; a mode no draw
reaches is reported MISSING, and is an error under ``require_modes``; a non-degenerate
requirement excludes the cases that could not show a bug; dev runs do not start with them."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import strategies as st

from kernel_harness.checks.modes import mode_cover, modes_first
from kernel_harness.checks.properties import Observer, build_property, run_property
from kernel_harness.core.backends import resolve_backend
from kernel_harness.run.profiles import get_profile
from tests.helpers import toy_family, toy_impls

BACKEND = resolve_backend("interpret")
#: length 8 is drawn in one case of 64: a free search of 6 (dev) usually misses it.
RARE = dataclasses.replace(
    toy_family.FAMILY, modes=frozenset({"length=4", "length=8"}),
    cases=lambda: st.builds(toy_family.ToyCase, dtype=st.just("float32"),
                            seed=st.integers(0, 2**16),
                            length=st.integers(0, 63).map(lambda n: 8 if n == 7 else 4)))


def _run(family, impl=None, *, first=True, require=False, max_examples=6, seed=1):
    observer = Observer()
    prop = build_property("matches-reference", family, backend=BACKEND, impl=impl,
                          observer=observer)
    return run_property("matches-reference", family, prop, backend=BACKEND, observer=observer,
                        profile=get_profile("ci"), max_examples=max_examples, seed=seed,
                        modes_first=first, require_modes=require), observer


def test_the_profiles_that_start_with_modes():
    assert modes_first("ci", None) and modes_first("nightly", None)
    assert not modes_first("dev", None) and modes_first("dev", True)
    assert not modes_first("ci", False)


def test_a_rare_mode_is_reached_first_and_its_bug_is_found():
    outcome, observer = _run(RARE, toy_impls.wrong_at_length_8)
    assert not outcome.passed and outcome.cover is not None
    assert set().union(*outcome.cover.reached) == {"length=4", "length=8"}
    assert observer.events["length=8"] >= 1


def test_without_modes_first_the_same_budget_misses_it():
    missed = sum(_run(RARE, toy_impls.wrong_at_length_8, first=False, seed=s)[0].passed
                 for s in range(5))
    assert missed >= 3  # the free search alone rarely draws length 8 in 6 examples


def test_the_cover_stays_within_the_budget_and_the_examples_stay_the_profiles():
    outcome, observer = _run(RARE, max_examples=6)
    assert outcome.passed and 1 <= len(outcome.cover.cases) <= 3
    assert observer.examples <= 6  # cover + free search: the budget, not more


def test_a_mode_no_draw_reaches_is_missing_and_an_error_when_required():
    never = dataclasses.replace(RARE, modes=RARE.modes | {"length=16"})
    outcome, _ = _run(never)
    assert outcome.passed and outcome.cover.missing == ("length=16",)
    outcome, _ = _run(never, require=True)
    assert not outcome.passed and "MISSING: length=16" in str(outcome.error)


def test_a_nondegenerate_requirement_excludes_cases_that_cannot_show_the_bug():
    picky = dataclasses.replace(RARE, nondegenerate={
        "length=4": ("an odd seed", lambda c: c.seed % 2 == 1)})
    cover = mode_cover(picky, run_seed=3, budget=4)
    assert not cover.missing
    assert all(c.seed % 2 for c, m in zip(cover.cases, cover.reached, strict=True)
               if "length=4" in m)


def test_a_declared_mode_strategy_is_drawn_when_the_family_strategy_misses():
    never8 = dataclasses.replace(
        RARE, cases=lambda: st.builds(toy_family.ToyCase, dtype=st.just("float32"),
                                      seed=st.integers(0, 9), length=st.just(4)),
        mode_cases={"length=8": lambda: st.builds(toy_family.ToyCase, dtype=st.just(
            "float32"), seed=st.integers(0, 9), length=st.just(8))})
    assert not mode_cover(never8, run_seed=0, budget=4).missing


def test_undeclared_modes_in_nondegenerate_are_refused():
    with pytest.raises(ValueError, match="do(es)? not declare"):
        dataclasses.replace(RARE, nondegenerate={"length=99": ("x", bool)})


def test_modes_the_user_left_out_are_not_missing() -> None:
    """Issue 56: under --without a mode only the excluded features reach is "left out by
    --without", never MISSING; a mode still reachable is still looked for."""
    from kernel_harness.records.narrow import narrow
    from kernel_harness.records.registry import get_family

    family = narrow(get_family("sdpa"), {"bias", "window"})
    cover = mode_cover(family, run_seed=0, budget=15)
    assert set(cover.excluded) == {"bias-full", "window"} and not cover.missing
    assert "left out (checked without): bias-full, window" in cover.line("sdpa", len(family.modes))
    assert cover.to_json(len(family.modes))["excluded"] == ["bias-full", "window"]


def test_a_cover_case_that_fails_is_named_as_one_not_as_a_seed_case():
    """A cover case runs as an explicit example (never shrunk): the report says it is one of
    the cover's cases, not "one of the family's seed cases" (issue 55, item 6)."""
    outcome, _ = _run(RARE, toy_impls.wrong_at_length_8)
    assert outcome.error is not None and outcome.shrink.explicit
    text = outcome.shrink.describe()
    assert "one of the modes-first cover's cases" in text and "seed cases" not in text, text
