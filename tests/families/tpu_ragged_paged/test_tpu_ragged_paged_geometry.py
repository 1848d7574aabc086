"""A library's page geometry is declared, not fixed (issue 56): ``ragged_cases`` takes the
page sizes, pages per sequence and query blocks a kernel is meant for, so 128-token pages
get multi-page tables (the default 4- and 8-token pages give at most 32 tokens a
sequence); the kernel passes such cases, and a geometry that cannot be drawn is a clear
error."""

from __future__ import annotations

import dataclasses
import functools

import pytest
from hypothesis import HealthCheck, given, settings

from kernel_harness import get_family, testing
from kernel_harness.families.tpu_ragged_paged.cases import ragged_cases

LIBRARY = functools.partial(ragged_cases, page_sizes=(128,), pages_per_seq=(2, 3),
                            queries_per_block=(16,), max_seqs=2)


def test_the_declared_geometry_is_drawn_and_reaches_multi_page_tables():
    seen = []

    @settings(max_examples=40, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(LIBRARY())
    def draws(case):
        assert case.page_size == 128 and 2 <= case.pages_per_seq <= 3
        assert case.queries_per_block == 16
        seen.append(max(case.kv_lens))

    draws()
    assert max(seen) > 128  # a sequence spans pages


# Nightly: the pristine kernel; its goldens run per push.
@pytest.mark.nightly
def test_the_kernel_passes_cases_of_a_declared_geometry():
    family = dataclasses.replace(get_family("tpu-ragged-paged"), cases=LIBRARY,
                                 seed_cases=lambda without=frozenset(): ())
    testing.check(family, profile="dev", properties=["matches-reference"], max_examples=2)


@pytest.mark.filterwarnings("ignore::hypothesis.errors.NonInteractiveExampleWarning")
@pytest.mark.parametrize("geometry, words", [
    ({"page_sizes": ()}, "page_sizes must be positive"),
    ({"pages_per_seq": (3, 2)}, "pages_per_seq must be (least, most)"),
    ({"queries_per_block": (0,)}, "queries_per_block must be positive"),
])
def test_a_geometry_that_cannot_be_drawn_says_what_is_accepted(geometry, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        ragged_cases(**geometry).example()
