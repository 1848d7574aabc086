"""Every family's declared modes are reached in every ci run, by examples that can show a
bug there (issue 40): ``matches-reference`` in the ci and nightly profiles starts with a
small cover of the modes (kernel_harness/checks/modes.py), drawn from the family's own
strategy with the run's seed, each mode reached non-degenerately (``Family.nondegenerate``).
A deterministic test over the registry, not a probability over seeds: the cover is what the
run runs, so a mode the cover misses for a seed is a mode that run misses. CI checks three
seeds (0 is a derandomized ci run's); the nightly suite ten."""

from __future__ import annotations

import pytest

from kernel_harness.checks.modes import mode_cover, modes_of
from kernel_harness.records.registry import family_names, get_family
from kernel_harness.run.profiles import get_profile
from tests.helpers.per_push import per_push

WITH_MODES = [n for n in family_names() if get_family(n).modes]
#: The cover's budget in a ci run: half of matches-reference's examples.
BUDGET = get_profile("ci").max_examples // 2


def test_every_built_in_family_declares_its_modes():
    assert set(family_names()) - set(WITH_MODES) <= {"torch-sdpa"}


def _assert_covered(name: str, seed: int) -> None:
    family = get_family(name)
    cover = mode_cover(family, run_seed=seed, budget=BUDGET)
    assert not cover.missing, cover.line(name, len(family.modes))
    assert len(cover.cases) <= BUDGET
    for case, reached in zip(cover.cases, cover.reached, strict=True):
        assert reached == modes_of(family, case)  # non-degenerate, recomputed
        assert family.case_type.from_json(case.to_json()) == case  # a replayable case


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("name", per_push(WITH_MODES))
def test_every_ci_run_reaches_every_declared_mode(name, seed):
    _assert_covered(name, seed)


@pytest.mark.nightly
@pytest.mark.parametrize("seed", range(3, 10))
@pytest.mark.parametrize("name", WITH_MODES)
def test_ten_seeds_reach_every_declared_mode(name, seed):
    _assert_covered(name, seed)
