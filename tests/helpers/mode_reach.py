"""How often ci-sized draws of a strategy reach each event (no kernel runs): the one helper
of the tests that every mode a family or strategy declares is drawn.

Why a rate over several seeded runs, not one derandomized ci draw: Hypothesis mixes
constants it finds in the process's loaded modules into about one choice in twenty
(``HypothesisProvider._maybe_draw_constant``), and caches them by the first test that asks.
So one "derandomized" stream changes with any edit to the code, and with the order tests
ran in an xdist worker: tpu-paged's derandomized ci draw reached a group of 8 thirteen
times in one process and never in CI's worker. Over :data:`RUNS` seeded ci-sized runs the
count of a mode's draws does not hinge on one stream, and a mode the strategy stops
drawing, or draws once in hundreds of cases, still fails.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterable

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from kernel_harness import get_family
from kernel_harness.checks.modes import cover_budget, mode_cover
from kernel_harness.run.profiles import get_profile

#: ci-sized runs (each the ci profile's matches-reference examples), seeds 0..RUNS-1.
RUNS = 10
#: Draws (of RUNS x ci examples) a mode must reach: about one ci run in four reaches it.
#: The rarest declared modes today are reached 13 or more times in 10 runs (flash's
#: ragged-q-block), so a miss here is a strategy change, not the luck of a stream.
MIN_HITS = 3


@dataclasses.dataclass(frozen=True)
class Reach:
    """Per event: draws that reached it (``hits``) and ci-sized runs that did (``runs``)."""

    hits: Counter[str]
    runs: Counter[str]
    n_runs: int
    examples: int

    def missing(self, modes: Iterable[str], min_hits: int = MIN_HITS) -> list[str]:
        """The modes drawn fewer than ``min_hits`` times, with their counts."""
        return [f"{m} ({self.hits[m]} draws, {self.runs[m]}/{self.n_runs} runs)"
                for m in sorted(set(modes)) if self.hits[m] < min_hits]

    def __contains__(self, event: object) -> bool:
        return self.hits[event] > 0


def _one_run(strategy: st.SearchStrategy, events: Callable[[object], Iterable[str]],
             run_seed: int, examples: int) -> list[set[str]]:
    """The events of each case of one seeded ci-sized run (generation only)."""
    drawn: list[set[str]] = []

    @seed(run_seed)
    @settings(max_examples=examples, database=None, deadline=None,
              phases=(Phase.generate,), suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(case: object) -> None:
        drawn.append(set(events(case)))

    collect()
    return drawn


def reach(strategy: st.SearchStrategy, events: Callable[[object], Iterable[str]], *,
          runs: int = RUNS) -> Reach:
    """Draws ``runs`` ci-sized runs of ``strategy`` (seeds 0..runs-1) and counts the events
    each case reaches."""
    examples = get_profile("ci").max_examples
    hits: Counter[str] = Counter()
    reached: Counter[str] = Counter()
    for s in range(runs):
        drawn = _one_run(strategy, events, s, examples)
        for case_events in drawn:
            hits.update(case_events)
        reached.update(set().union(*drawn))
    return Reach(hits=hits, runs=reached, n_runs=runs, examples=examples)


def family_reach(name: str, runs: int = RUNS) -> Reach:
    """:func:`reach` of the registered family's strategy and events."""
    fam = get_family(name)
    return reach(fam.cases(), fam.events, runs=runs)


def assert_reaches(found: Reach, modes: Iterable[str], what: str = "the draw") -> None:
    """Every mode is drawn at least :data:`MIN_HITS` times in the runs."""
    missing = found.missing(modes)
    assert not missing, (f"{what}: {found.n_runs} ci-sized runs ({found.examples} examples "
                         f"each) draw these modes fewer than {MIN_HITS} times: {missing}")


def assert_cover_runs(family: object, modes: Iterable[str], *, run_seed: int,
                      examples: int) -> None:
    """The modes-first cover of ``family`` at ``examples`` examples (run seed ``run_seed``)
    runs, for every mode, at least one case that reaches it."""
    cover = mode_cover(family, run_seed=run_seed, budget=cover_budget(examples))
    missing = sorted(set(modes) - set().union(*cover.reached))
    assert not missing, (f"the modes-first cover (run seed {run_seed}, {examples} examples) "
                         f"runs no case of {missing}; it missed {cover.missing}")
