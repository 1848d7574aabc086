"""Groups of more than 1024 rows (a busy expert) are part of megablox-gmm's problem: the
strategy draws them cheaply (k and n of 1-2 tiles), every ci run's cover reaches one, and
a kernel that is wrong only on them fails (issue 55, item 6)."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import pytest
from hypothesis import HealthCheck, Phase, given, settings

from kernel_harness import get_family, resolve_backend
from kernel_harness.checks.properties import HarnessFailure, matches_reference
from kernel_harness.families.megablox_gmm import kernel
from kernel_harness.families.megablox_gmm.family import events
from kernel_harness.ops.grouped_matmul.cases import BIG_GROUP_ROWS, GmmCase, gmm_cases
from kernel_harness.run.profiles import get_profile
from tests.helpers.mode_reach import assert_cover_runs, assert_reaches, family_reach, reach

BACKEND = resolve_backend("interpret")
FAMILY = get_family("megablox-gmm")
MODE = "group-over-1024-rows"


def test_ci_sized_draws_reach_a_group_over_1024_rows():
    assert_reaches(family_reach("megablox-gmm"), (MODE,), "megablox-gmm")


def test_aligned_draws_reach_it_too():
    found = reach(gmm_cases(without=frozenset({"sizes-below-128"})), events)
    assert_reaches(found, (MODE,), "megablox-gmm without sizes-below-128")


@pytest.mark.parametrize("run_seed", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("examples", [8, get_profile("ci").max_examples])
def test_the_modes_first_cover_runs_a_big_group_case(run_seed, examples):
    assert_cover_runs(FAMILY, [MODE], run_seed=run_seed, examples=examples)


@settings(max_examples=80, deadline=None, database=None, derandomize=True)
@given(case=gmm_cases())
def test_big_group_cases_stay_cheap(case):
    if max(case.group_sizes) > BIG_GROUP_ROWS:
        assert case.m <= 1536 and case.k <= 192 and case.n <= 192
        assert case.tiling[0] == 128
    else:
        assert case.m <= 256


def test_the_event_counts_only_groups_of_the_rhs_shard():
    base = GmmCase(dtype="float32", seed=0, m=1280, k=128, n=128, group_sizes=(1100, 100))
    assert MODE in events(base)
    other = dataclasses.replace(base, group_offset=1, local_groups=1)
    assert MODE not in events(other)
    assert MODE in events(dataclasses.replace(base, group_offset=0, local_groups=1))


def zero_big_groups(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                    existing_out, transpose_rhs, interpret):
    """The real gmm, but rows of groups of more than 1024 rows come back as zeros."""
    out = kernel.gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                     existing_out, transpose_rhs, interpret)
    sizes = jnp.repeat(group_sizes, group_sizes, total_repeat_length=lhs.shape[0])
    return jnp.where((sizes > BIG_GROUP_ROWS)[:, None], jnp.zeros_like(out), out)


def test_a_kernel_wrong_only_on_big_groups_fails_on_out():
    strategy = gmm_cases().filter(lambda c: MODE in events(c))
    prop = settings(max_examples=1, deadline=None, database=None, derandomize=True,
                    phases=(Phase.generate,), suppress_health_check=list(HealthCheck))(
        matches_reference(dataclasses.replace(FAMILY, cases=lambda: strategy),
                          backend=BACKEND, impl=zero_big_groups))
    with pytest.raises(HarnessFailure) as info:
        prop()
    assert "out" in {v.stats.output for v in info.value.result.failures}
