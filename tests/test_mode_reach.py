"""The mode-reach helper every per-family "draws every mode" test uses fails where a mode
is not drawn, names it with its counts, and is not fooled by one lucky stream."""

from __future__ import annotations

import pytest
from hypothesis import strategies as st

from kernel_harness.families.tpu_paged.cases import tpu_paged_cases
from kernel_harness.families.tpu_paged.family import events
from tests.helpers.mode_reach import MIN_HITS, RUNS, assert_reaches, reach


def test_a_mode_never_drawn_fails_and_is_named():
    found = reach(st.tuples(st.sampled_from(["a", "b"]), st.integers()), lambda c: [c[0]], runs=2)
    assert_reaches(found, ["a", "b"])
    with pytest.raises(AssertionError, match=r"c \(0 draws, 0/2 runs\)"):
        assert_reaches(found, ["a", "c"])


def test_a_mode_drawn_once_in_hundreds_fails():
    # 'rare' comes up about once in 1000 draws: far under MIN_HITS in RUNS ci-sized runs.
    found = reach(st.integers(1, 1000), lambda n: ["rare"] if n == 777 else ["common"])
    assert found.hits["common"] > RUNS
    with pytest.raises(AssertionError, match="rare"):
        assert_reaches(found, ["rare"])
    assert MIN_HITS >= 2


def test_tpu_paged_without_groups_of_8_misses_that_mode():
    found = reach(tpu_paged_cases(groups=(1, 2, 4, 3)), events)
    with pytest.raises(AssertionError, match="group-multiple-of-8"):
        assert_reaches(found, ["group-multiple-of-8", "gqa"], "tpu-paged")
