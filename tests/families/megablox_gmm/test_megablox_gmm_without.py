"""megablox-gmm's optional features: narrowed by --without, an implementation refusing
group offsets and sizes below 128 (as tokamax's ragged_dot does) passes the cases it
supports; the full strategy makes it fail."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from kernel_harness import get_family, resolve_backend
from kernel_harness.checks.properties import HarnessFailure, matches_reference
from kernel_harness.core.errors import UsageError
from kernel_harness.ops.grouped_matmul.cases import gmm_cases
from kernel_harness.records.narrow import narrow
from kernel_harness.run.crash import KernelCrash
from tests.helpers.refusing_gmm import gmm as refusing_gmm

BACKEND = resolve_backend("interpret")
FEATURES = ("group-offset", "sizes-below-128")


def _run(family, impl, n=3):
    settings(max_examples=n, deadline=None, database=None, derandomize=True,
             phases=(Phase.generate,), suppress_health_check=list(HealthCheck))(
        matches_reference(family, backend=BACKEND, impl=impl))()


@settings(max_examples=60, deadline=None, database=None, derandomize=True)
@given(case=gmm_cases(without=frozenset(FEATURES)))
def test_narrowed_strategy_draws_no_offset_and_only_aligned_sizes(case):
    assert case.group_offset is None
    assert all(s % 128 == 0 for s in (case.m, case.k, case.n, *case.tiling, *case.group_sizes))


# Nightly: gpu-norm's and sdpa's refusing implementations take the same path per push.
@pytest.mark.nightly
def test_the_refusing_impl_passes_the_narrowed_family():
    _run(narrow(get_family("megablox-gmm"), FEATURES), refusing_gmm)


def test_the_refusing_impl_fails_the_full_family():
    with pytest.raises((HarnessFailure, KernelCrash), match="group_offset|multiples of 128"):
        _run(get_family("megablox-gmm"), refusing_gmm)


def test_an_unknown_feature_is_a_usage_error():
    with pytest.raises(UsageError, match="known: group-offset, sizes-below-128"):
        narrow(get_family("megablox-gmm"), ["residual"])
