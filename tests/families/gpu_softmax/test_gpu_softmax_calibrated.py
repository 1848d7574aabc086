"""gpu-softmax's calibrated judge: a bfloat16 softmax whose denominator is accumulated in
bfloat16 fails matches-reference (the fixed 1e-2 table let it pass); the kernel passes."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, Phase, settings

from kernel_harness import get_family, resolve_backend
from kernel_harness.checks.properties import HarnessFailure, matches_reference
from kernel_harness.ops.softmax.cases import SoftmaxCase, softmax_cases
from kernel_harness.ops.softmax.reference import low_precision_reference, reference
from tests.helpers.planted_softmax import denominator_in_input_dtype

BACKEND = resolve_backend("interpret")
LONG_BF16 = softmax_cases(dtypes=("bfloat16",)).filter(lambda c: c.n >= 100)


def _run(impl):
    family = dataclasses.replace(get_family("gpu-softmax"), cases=lambda: LONG_BF16)
    settings(max_examples=4, deadline=None, database=None, derandomize=True,
             phases=(Phase.generate,), suppress_health_check=list(HealthCheck))(
        matches_reference(family, backend=BACKEND, impl=impl))()


def test_a_bfloat16_denominator_fails():
    with pytest.raises(HarnessFailure, match="calibrated"):
        _run(denominator_in_input_dtype)


def test_the_kernel_passes_the_same_cases():
    _run(None)


def test_the_twin_rounds_where_the_reference_does_not():
    case = SoftmaxCase(dtype="bfloat16", seed=3, leading=(2, 3), n=1000)
    inputs = case.materialize()
    exact, twin = reference(case, inputs)["out"], low_precision_reference(case, inputs)["out"]
    assert 0 < abs(exact - twin).max() <= 2.0**-8 * abs(exact).max() * 1.01
