"""Planted bugs: wrappers around the real megablox gmm that the family check must catch.

Each test runs the family's real matches-reference property (a few derandomized
examples, no shrinking) with the buggy implementation on the interpret backend and
asserts it fails on the output the bug touches. Strategies are narrowed only so every
example can reach the bug.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, settings

from kernel_harness import get_family, resolve_backend
from kernel_harness.checks.properties import HarnessFailure, matches_reference
from kernel_harness.families.megablox_gmm import kernel
from kernel_harness.ops.grouped_matmul.cases import gmm_cases

BACKEND = resolve_backend("interpret")


def gmm_in_bf16(lhs, rhs, *args):
    """A float32 gmm whose operands are secretly rounded to bfloat16."""
    return kernel.gmm(lhs.astype(jnp.bfloat16).astype(lhs.dtype),
                      rhs.astype(jnp.bfloat16).astype(rhs.dtype), *args)


def gmm_boundary_off_by_one(lhs, rhs, group_sizes, *args):
    """The first group ends one row late (the next one starts one row late)."""
    nz = jnp.argmax(group_sizes > 0)
    shifted = group_sizes.at[nz].add(1)
    nxt = jnp.argmax((jnp.arange(group_sizes.size) > nz) & (group_sizes > 0))
    return kernel.gmm(lhs, rhs, shifted.at[nxt].add(-1), *args)


def gmm_ignores_group_offset(lhs, rhs, group_sizes, pet, tiling, group_offset, *rest):
    """The shard's offset is dropped: rhs group j is used for global group j."""
    if group_offset is not None:
        group_offset = jnp.zeros_like(group_offset)
    return kernel.gmm(lhs, rhs, group_sizes, pet, tiling, group_offset, *rest)


def gmm_drhs_doubled(lhs, rhs, *args):
    """Right forward and dlhs; drhs twice what it should be."""
    return kernel.gmm(lhs, rhs * 2.0 + jax.lax.stop_gradient(rhs - rhs * 2.0), *args)


def _fails(impl, strategy, max_examples=6):
    family = dataclasses.replace(get_family("megablox-gmm"), cases=lambda: strategy)
    prop = settings(max_examples=max_examples, deadline=None, database=None, derandomize=True,
                    phases=(Phase.generate,), suppress_health_check=list(HealthCheck))(
        matches_reference(family, backend=BACKEND, impl=impl))
    with pytest.raises(HarnessFailure) as info:
        prop()
    return {v.stats.output for v in info.value.result.failures}


def _two_groups_cut_mid_tile(c):
    sizes = [s for s in c.group_sizes if s]
    return not c.sharded and len(sizes) > 1 and sum(c.group_sizes) == c.m


# Nightly: one planted bug of this family per push (the group boundary).
@pytest.mark.nightly
def test_float32_gmm_in_bf16_fails():
    assert "out" in _fails(gmm_in_bf16, gmm_cases(dtypes=("float32",)))


def test_group_boundary_off_by_one_fails():
    assert "out" in _fails(gmm_boundary_off_by_one, gmm_cases().filter(_two_groups_cut_mid_tile))


# Nightly: one planted bug of this family per push (the group boundary).
@pytest.mark.nightly
def test_ignoring_group_offset_fails():
    failed = _fails(gmm_ignores_group_offset,
                    gmm_cases().filter(lambda c: c.sharded and c.offset > 0
                                       and sum(c.group_sizes[:c.offset]) < c.m))
    assert "out" in failed


# Nightly: one planted bug of this family per push (the group boundary).
@pytest.mark.nightly
def test_wrong_drhs_fails_on_drhs_only():
    failed = _fails(gmm_drhs_doubled,
                    gmm_cases().filter(lambda c: any(c.local_rows())))
    assert failed == {"drhs"}


def test_unwritten_rows_are_excluded_not_compared():
    """Unsharded rows past the groups are outside the contract; sharded ones are checked."""
    fam = get_family("megablox-gmm")
    from kernel_harness.ops.grouped_matmul.cases import GmmCase

    case = GmmCase(dtype="float32", seed=0, m=16, k=128, n=128, group_sizes=(3, 5),
                   tiling=(8, 128, 128))
    rows = fam.valid(case)["out"][:, 0]
    np.testing.assert_array_equal(rows, np.arange(16) < 8)
    sharded = dataclasses.replace(case, group_offset=1, local_groups=1)
    assert fam.valid(sharded) == {}
