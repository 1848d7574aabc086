"""Coverage steering (issue 40): with kernel-branch coverage on, every matches-reference
example tells Hypothesis how many branch outcomes of the kernel it reached and how many it
reached first (``hypothesis.target``), so the search mutates the examples that opened new
paths; with coverage off it reports nothing. (Its effect on a ci run: docs/kernel-coverage.md.)"""

from __future__ import annotations

import hypothesis
from hypothesis import HealthCheck, Phase

from kernel_harness.checks.properties import PROPERTIES
from kernel_harness.core.backends import resolve_backend
from kernel_harness.run import kernel_coverage
from kernel_harness.run.kernel_coverage import FIRST_LABEL, REACHED_LABEL, recording
from tests.helpers import planted_kernels as pk

SETTINGS = hypothesis.settings(max_examples=4, deadline=None, database=None, derandomize=True,
                               phases=[Phase.explicit, Phase.generate],
                               suppress_health_check=list(HealthCheck))


def _targets(monkeypatch, *, coverage: bool) -> list[tuple[str, float]]:
    seen: list[tuple[str, float]] = []
    real = hypothesis.target

    def target(value, *, label=""):
        seen.append((label, value))
        return real(value, label=label)

    monkeypatch.setattr(kernel_coverage.hypothesis, "target", target)
    prop = PROPERTIES["matches-reference"](pk.TOY_ATTENTION, backend=resolve_backend("interpret"))
    if coverage:
        with recording():
            SETTINGS(prop)()
    else:
        SETTINGS(prop)()
    return seen


def test_every_example_reports_the_outcomes_it_reached_and_reached_first(monkeypatch):
    seen = _targets(monkeypatch, coverage=True)
    reached = [v for label, v in seen if label == REACHED_LABEL]
    first = [v for label, v in seen if label == FIRST_LABEL]
    assert len(reached) == len(first) >= 2  # one of each per example
    assert reached[0] > 0 and first[0] == reached[0]  # the first example: all of it is new
    assert all(f <= r for f, r in zip(first, reached, strict=True))
    assert sum(first) <= sum(reached)


def test_with_coverage_off_nothing_is_reported(monkeypatch):
    assert kernel_coverage.current() is None
    seen = _targets(monkeypatch, coverage=False)
    assert seen and not [label for label, _ in seen if label in (REACHED_LABEL, FIRST_LABEL)]


def test_reached_since_counts_grown_and_new_outcomes():
    cov = kernel_coverage.KernelCoverage()
    cov.sites[("k", "f.py", 1, "cond")] = kernel_coverage.SiteCoverage(
        kernel="k", file="f.py", line=1, function="f", kind="cond", detail="cond", source="",
        counts={"true": 2, "false": 0})
    before = cov.seen()
    cov.sites[("k", "f.py", 1, "cond")].counts.update(true=3, false=1)
    assert cov.reached_since(before) == (2, 1)
    assert cov.reached_since(cov.seen()) == (0, 0)
