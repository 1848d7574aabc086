"""``matches-reference`` reports its worst error/tolerance ratio to ``hypothesis.target``
(issue 11), so the target phase searches towards the worst case."""

from __future__ import annotations

import math

import hypothesis
import pytest
from hypothesis import settings

from kernel_harness.checks import matches_reference as mr
from kernel_harness.core.backends import resolve_backend
from tests.helpers import toy_family, toy_impls


def _observed(monkeypatch, impl, seen=None) -> list[tuple[float, str]]:
    seen = [] if seen is None else seen
    monkeypatch.setattr(hypothesis, "target", lambda x, *, label="": seen.append((x, label)))
    prop = mr.matches_reference(toy_family.FAMILY, backend=resolve_backend("interpret"),
                                impl=impl)
    settings(max_examples=5, database=None, derandomize=True)(prop)()
    return seen


def test_target_gets_the_worst_error_over_tolerance(monkeypatch):
    # slightly_worse: relative error 3e-6 against a 1e-5 tolerance -> ratio ~0.3.
    seen = _observed(monkeypatch, toy_impls.slightly_worse)
    assert seen and {label for _, label in seen} == {mr.TARGET_LABEL}
    assert all(0.2 < x < 0.4 for x, _ in seen), seen
    pristine = _observed(monkeypatch, toy_family.softplus)
    assert max(x for x, _ in pristine) < 0.1, pristine


def test_target_sees_a_failure_as_a_ratio_above_one(monkeypatch):
    seen: list[tuple[float, str]] = []
    with pytest.raises(mr.HarnessFailure):
        _observed(monkeypatch, toy_family.wrong_softplus, seen)
    # wrong_softplus is 1% off in one element: ~1000x the 1e-5 tolerance.
    assert max(x for x, _ in seen) > 100, seen


def test_non_finite_errors_are_capped():
    class _V:
        def __init__(self, err):
            self.stats = type("S", (), {"max_rel_err": err, "slice_rel_err": 0.0})()
            self.tolerance = type("T", (), {"max_rel_err": 1e-5})()
            self.usage = err / 1e-5  # Verdict.usage of a fixed-table verdict

    result = type("R", (), {"verdicts": (_V(math.nan), _V(1e-6))})()
    assert mr.worst_ratio(result) == mr.TARGET_CAP
    result = type("R", (), {"verdicts": (_V(math.inf),)})()
    assert mr.worst_ratio(result) == mr.TARGET_CAP
    result = type("R", (), {"verdicts": (_V(2e-5), _V(1e-6))})()
    assert mr.worst_ratio(result) == pytest.approx(2.0)
