"""megablox-gmm's op relations pass on the kernel and fail on a planted bug each."""

from __future__ import annotations

import jax.numpy as jnp
import pytest

from kernel_harness.checks.metamorphic import MetamorphicFailure
from kernel_harness.families.megablox_gmm import kernel
from kernel_harness.ops.grouped_matmul.cases import gmm_cases
from tests.helpers.relation_runs import run_relation

UNSHARDED = gmm_cases(dtypes=("float32",)).filter(
    lambda c: not c.sharded and sum(s > 0 for s in c.group_sizes) >= 2)


def rhs_reversed(lhs, rhs, *args):
    """Planted: group g multiplies rhs block G-1-g."""
    return kernel.gmm(lhs, rhs[::-1], *args)


def last_row_dropped(lhs, rhs, group_sizes, *args):
    """Planted: the row mask of a group ends one row early (its last row stays 0)."""
    ends = jnp.cumsum(group_sizes)
    rows = jnp.arange(lhs.shape[0])[:, None]
    last = ((rows == ends[None, :] - 1) & (group_sizes[None, :] > 0)).any(axis=1)
    return kernel.gmm(lhs, rhs, group_sizes, *args) * (~last)[:, None]


def empty_groups_skip_rhs(lhs, rhs, group_sizes, *args):
    """Planted: the i-th non-empty group takes rhs block i (empty groups use no block)."""
    order = jnp.argsort(group_sizes == 0, stable=True)
    return kernel.gmm(lhs, rhs, group_sizes[order], *args)


@pytest.mark.nightly  # the pristine kernel on drawn cases: docs/ci.md
@pytest.mark.parametrize("name", ["groups-permuted", "group-split", "empty-group"])
def test_relation_passes_on_the_kernel(name):
    observer = run_relation("megablox-gmm", name, gmm_cases(), max_examples=2)
    assert observer.examples >= 1 and observer.failed == 0


def test_groups_permuted_catches_a_reversed_rhs():
    with pytest.raises(MetamorphicFailure, match="reordered"):
        run_relation("megablox-gmm", "groups-permuted", UNSHARDED, impl=rhs_reversed)


def test_group_split_catches_a_group_end_off_by_one():
    with pytest.raises(MetamorphicFailure, match="split"):
        run_relation("megablox-gmm", "group-split", UNSHARDED, impl=last_row_dropped)


# Nightly: the relations' machinery catches its planted bug per push in the two relations above.
@pytest.mark.nightly
def test_empty_group_catches_rhs_indexed_by_non_empty_groups():
    with pytest.raises(MetamorphicFailure, match="empty group inserted"):
        run_relation("megablox-gmm", "empty-group", UNSHARDED, impl=empty_groups_skip_rhs,
                     max_examples=4)
