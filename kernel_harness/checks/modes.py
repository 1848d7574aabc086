"""Modes first: every mode a family declares is reached on purpose, by an example that can
show a bug there, before the free search (issue 40).

A family declares its modes (``Family.modes``: events naming the kernel's paths) and, where
reaching the event is not enough, what "non-degenerate" means for a mode
(``Family.nondegenerate``: ``{mode: (why, case -> bool)}``, e.g. several kv heads per core
and a row with tokens on each core). :func:`mode_cover` draws cases of the family's own
strategy (generation only, no kernel runs, seeded by the run's seed), keeps those that
reach a mode non-degenerately, and picks a small set that covers every mode (greedy set
cover: the case covering the most modes not yet covered first). ``matches-reference`` runs
that set first, as explicit examples, then the free search with the rest of its budget: the
number of examples stays the profile's. A mode no draw reached is reported MISSING (a
warning; an error under ``--require-modes``).

Drawing is not free (10-70 ms per case for the attention strategies), so the cover runs in
the ``ci`` and ``nightly`` profiles, where "every mode, every run" is the promise; ``dev``
keeps its handful of free examples.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, given, seed, settings

from kernel_harness.records.family import Family
from kernel_harness.records.narrow import unnarrowed_cases

#: Profiles whose matches-reference runs start with the cover.
MODES_FIRST_PROFILES: frozenset[str] = frozenset({"ci", "nightly"})
#: Cases drawn at most while looking for every mode (generation only).
MAX_DRAWS = 400


def modes_first(profile: str | None, asked: bool | None) -> bool:
    """Whether a run starts with the cover: as ``asked`` (``--modes-first`` /
    ``--no-modes-first``), else in the profiles of :data:`MODES_FIRST_PROFILES`."""
    return asked if asked is not None else profile in MODES_FIRST_PROFILES


@dataclasses.dataclass(frozen=True)
class Cover:
    """The explicit examples that reach the family's modes, and what they reach.

    Attributes:
      cases: the examples, in the order they run.
      reached: per case, the modes it reaches non-degenerately.
      missing: declared modes no case of the cover reaches (not drawn in ``draws``
        draws, or left out by the budget).
      draws: cases drawn to find them; seconds: the drawing's time.
      excluded: declared modes the narrowed family no longer draws and its strategy
        without the exclusions does (``--without``, the project's ``without`` or
        ``known-bugs``, each named in the report's "checked without": never MISSING).
    """

    cases: tuple[Any, ...]
    reached: tuple[frozenset[str], ...]
    missing: tuple[str, ...]
    draws: int
    seconds: float
    excluded: tuple[str, ...] = ()

    def line(self, family: str, declared: int) -> str:
        """One line for the report: how many examples reached how many modes."""
        wanted = declared - len(self.excluded)
        text = (f"{family}: modes first: {len(self.cases)} example(s) reach "
                f"{wanted - len(self.missing)}/{wanted} declared modes ({self.draws} "
                f"cases drawn in {self.seconds:.1f}s)")
        if self.excluded:
            text += f"; left out (checked without): {', '.join(self.excluded)}"
        if self.missing:
            text += f"; MISSING: {', '.join(self.missing)}"
        return text

    def to_json(self, declared: int) -> dict[str, Any]:
        """For the unit's JSON record."""
        return {"declared": declared, "examples": len(self.cases),
                "missing": list(self.missing), "excluded": list(self.excluded),
                "draws": self.draws,
                "seconds": round(self.seconds, 3)}


def modes_of(family: Family, case: Any, events: Iterable[str] | None = None) -> frozenset[str]:
    """The declared modes ``case`` reaches non-degenerately."""
    seen = set(family.events(case) if events is None else events) & family.modes
    return frozenset(m for m in seen if m not in family.nondegenerate
                     or family.nondegenerate[m][1](case))


class ModesNotReached(RuntimeError):
    """``--require-modes``: a declared mode was not reached by this run."""


class _AllFound(Exception):
    """Every mode was seen: the drawing stops."""


def _draw(family: Family, run_seed: int, max_draws: int
          ) -> tuple[list[tuple[Any, frozenset[str]]], int]:
    """Cases that reach a mode not reached before, in order: from the family's strategy,
    then, for a mode still missing, from its ``mode_cases`` strategy."""
    found: list[tuple[Any, frozenset[str]]] = []
    seen: set[str] = set()
    draws = [0]

    def search(strategy: Any, wanted: frozenset[str], limit: int) -> None:
        @seed(run_seed)
        @settings(max_examples=limit, database=None, deadline=None, derandomize=False,
                  phases=(Phase.generate,), suppress_health_check=list(HealthCheck),
                  verbosity=Verbosity.quiet, report_multiple_bugs=False)
        @given(strategy)
        def collect(case: Any) -> None:
            if seen >= wanted:
                raise _AllFound  # (also on Hypothesis's replay of this "failure")
            draws[0] += 1
            modes = modes_of(family, case)
            if modes - seen:
                found.append((case, modes))
                seen.update(modes)
            if seen >= wanted:
                raise _AllFound

        try:
            collect()
        except _AllFound:
            pass

    search(family.cases(), family.modes, max_draws)
    for mode, strategy in sorted(family.mode_cases.items()):
        if mode not in seen:
            search(strategy(), frozenset({mode}), max(1, max_draws // 8))
    return found, draws[0]


#: Covers drawn in this process, by family object (kept alive beside its cover, so its
#: id is not reused), seed, budget and draws.
_COVERS: dict[tuple[Any, ...], tuple[Family, Cover]] = {}


_MAX_COVERS = 256


def _cover(family: Family, run_seed: int, budget: int, max_draws: int) -> Cover:
    key = (id(family), run_seed, budget, max_draws)
    if key not in _COVERS:
        while len(_COVERS) >= _MAX_COVERS:  # every session narrows its families anew
            del _COVERS[next(iter(_COVERS))]
        _COVERS[key] = (family, _greedy(family, run_seed, budget, max_draws))
    return _COVERS[key][1]


def _greedy(family: Family, run_seed: int, budget: int, max_draws: int) -> Cover:
    start = time.perf_counter()
    found, draws = _draw(family, run_seed, max_draws)
    uncovered, chosen = set(family.modes), []
    while uncovered and len(chosen) < budget:
        case, modes = max(found, key=lambda f: len(f[1] & uncovered), default=(None, set()))
        if not modes & uncovered:
            break
        chosen.append((case, frozenset(modes)))
        uncovered -= modes
    excluded: set[str] = set()
    if family.without and uncovered:  # reached without --without: the user left them out
        base = dataclasses.replace(family, cases=unnarrowed_cases(family),
                                   without=frozenset())
        excluded = set().union(*(m for _, m in _draw(base, run_seed, max_draws)[0]))
        excluded &= uncovered
    return Cover(cases=tuple(c for c, _ in chosen), reached=tuple(m for _, m in chosen),
                 missing=tuple(sorted(uncovered - excluded)), draws=draws,
                 seconds=time.perf_counter() - start, excluded=tuple(sorted(excluded)))


def mode_cover(family: Family, *, run_seed: int, budget: int,
               max_draws: int = MAX_DRAWS) -> Cover:
    """At most ``budget`` cases of ``family``'s strategy that together reach every declared
    mode non-degenerately, drawn with ``run_seed`` (the same for the same family, seed and
    budget in one process). A family without modes gets an empty cover."""
    if not family.modes or budget < 1:
        return Cover(cases=(), reached=(), missing=tuple(sorted(family.modes)), draws=0,
                     seconds=0.0)
    return _cover(family, run_seed, budget, max_draws)


def cover_budget(max_examples: int) -> int:
    """The cover's share of a property's examples: at most half."""
    return max(1, max_examples // 2)


def start_with_cover(prop: Any, family: Family, *, max_examples: int, run_seed: int | None,
                     cover: Cover | None = None) -> tuple[Any, int, Cover | None]:
    """``prop`` (a property that takes explicit examples: ``kh_example``) with the cover of
    ``family``'s modes run first, and the examples left for the free search, so the total
    stays ``max_examples``; the cover takes at most half (:func:`cover_budget`). ``cover``:
    one drawn already (``mutate`` draws it once for all its mutants). Unchanged (and None)
    for a family without modes or a property without ``kh_example``."""
    if not family.modes or not hasattr(prop, "kh_example"):
        return prop, max_examples, None
    if cover is None:
        cover = mode_cover(family, run_seed=0 if run_seed is None else run_seed,
                           budget=cover_budget(max_examples))
    for case in reversed(cover.cases):  # explicit examples run in the order given
        prop = prop.kh_example(case)(prop)
    return prop, max(1, max_examples - len(cover.cases)), cover

