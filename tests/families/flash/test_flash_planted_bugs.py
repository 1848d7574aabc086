"""Planted bugs in the flash kernel must make the flash family check fail.

Fast tests run each planted bug on a hand-made case with every feature on. The sweep runs
every planted bug through the ``ci`` profile's property, as ``kernel-harness check flash
--profile ci`` does, and requires a failure: it is flash's kill matrix (as ``kernel-harness
mutate flash`` measures it), about 5 minutes of the suite, so it runs nightly (marker
``nightly``). Every push kills the ``ci``-tagged mutants of the catalog in a child process
(``tests/regression/test_mutate.py``: the forward, dq, dkv and batch-block edits) and the
sharp cases below.
"""

from __future__ import annotations

import hypothesis
import pytest

from kernel_harness import check_case, get_family, resolve_backend
from kernel_harness.checks.modes import start_with_cover
from kernel_harness.checks.properties import HarnessFailure, Observer, matches_reference
from kernel_harness.families.flash.cases import FlashCase
from kernel_harness.run.crash import KernelCrash
from kernel_harness.run.profiles import get_profile
from tests.helpers.flash_mutants import ALL_MUTANTS, SHARP_CASES, SOURCE_MUTANTS, mutant

FAMILY = get_family("flash")
BACKEND = resolve_backend("interpret")


def _impl(name: str):
    # A catalog entry that no longer applies is a StaleMutant error, never a skip
    # (tests/regression/test_mutate.py checks every entry applies).
    return mutant(name)


@pytest.mark.nightly  # flash per push: its goldens (both stacks, tpu-interpret)
def test_real_kernel_passes_the_sharp_cases():
    for kwargs in SHARP_CASES.values():
        result = check_case(FAMILY, FlashCase(**kwargs), BACKEND)
        assert result.passed, [v.problems for v in result.failures]


FAST = {
    "wrapper-dq-scaled-twice": ("tiled", "dq"),
    "wrapper-backward-ignores-segments": ("tiled", "dq"),
    "wrapper-backward-drops-bias": ("tiled", "dq"),
    "wrapper-pv-in-bf16": ("tiled", "out"),
    "fwd-single-step-no-bias": ("single-tile", "out"),
    "fwd-partial-batch-block-dropped": ("tiled", "out"),
}


@pytest.mark.nightly
@pytest.mark.parametrize("name", sorted(FAST))
def test_planted_bug_fails_on_sharp_case(name):
    case_name, output = FAST[name]
    result = check_case(FAMILY, FlashCase(**SHARP_CASES[case_name]), BACKEND, _impl(name))
    assert not result.passed
    assert output in {v.stats.output for v in result.failures}


@pytest.mark.nightly
@pytest.mark.slow
@pytest.mark.parametrize("name", ALL_MUTANTS)
def test_planted_bug_fails_ci_profile(name):
    observer = Observer()
    prop = matches_reference(FAMILY, backend=BACKEND, impl=_impl(name), observer=observer)
    # As `check --profile ci` runs it: the modes-first cover first (a ragged last q block is
    # one of flash's modes: the bare draws missed it in 30 examples), then the search.
    prop, examples, _ = start_with_cover(
        prop, FAMILY, max_examples=get_profile("ci").max_examples, run_seed=None)
    settings = hypothesis.settings(
        get_profile("ci"), max_examples=examples,
        phases=(hypothesis.Phase.explicit, hypothesis.Phase.generate)
    )
    # A wrong answer or a crash (e.g. the interpreter's callback failing on an
    # out-of-bounds access the planted bug makes): either way the bug is caught.
    with pytest.raises((HarnessFailure, KernelCrash)):
        settings(prop)()
    assert observer.examples <= 30 + len(FAMILY.seed_cases(FAMILY.without))


def test_every_source_mutant_applies():
    for name in SOURCE_MUTANTS:
        assert callable(_impl(name))
