"""gpu-norm's optional features: narrowed by --without, an implementation lacking
rms_norm, float16, long and unaligned rows passes the cases it supports; the full
strategy makes it fail."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from kernel_harness import get_family, resolve_backend
from kernel_harness.checks.properties import HarnessFailure, matches_reference
from kernel_harness.ops.norm.cases import OPTIONAL, norm_cases, uses
from kernel_harness.records.narrow import narrow
from kernel_harness.run.crash import KernelCrash
from tests.helpers.refusing_norm import norm as refusing_norm

BACKEND = resolve_backend("interpret")
ALL = frozenset(OPTIONAL)


def _run(family, impl, n=3):
    settings(max_examples=n, deadline=None, database=None, derandomize=True,
             phases=(Phase.generate,), suppress_health_check=list(HealthCheck))(
        matches_reference(family, backend=BACKEND, impl=impl))()


@settings(max_examples=60, deadline=None, database=None, derandomize=True)
@given(case=norm_cases(without=ALL))
def test_narrowed_strategy_uses_none_of_the_features(case):
    assert not uses(case)


def test_seed_cases_respect_without():
    fam = get_family("gpu-norm")
    for feature in OPTIONAL:
        assert all(feature not in uses(c) for c in fam.seed_cases(frozenset({feature})))
    assert fam.seed_cases(ALL)


def test_the_refusing_impl_passes_the_narrowed_family():
    _run(narrow(get_family("gpu-norm"), ALL), refusing_norm)


def test_the_refusing_impl_fails_the_full_family():
    with pytest.raises((HarnessFailure, KernelCrash), match="not supported|multiples of 128"):
        _run(get_family("gpu-norm"), refusing_norm)
