"""megablox-gmm's calibrated judge (bfloat16): a float32 out of bfloat16 operands that is
secretly rounded to bfloat16 (2^-9, inside the fixed 8e-3 table) fails; the kernel passes."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import pytest
from hypothesis import HealthCheck, Phase, settings

from kernel_harness import get_family, resolve_backend
from kernel_harness.checks.properties import HarnessFailure, matches_reference
from kernel_harness.families.megablox_gmm import kernel
from kernel_harness.ops.grouped_matmul.cases import gmm_cases

BACKEND = resolve_backend("interpret")
F32_OUT = gmm_cases(dtypes=("bfloat16",)).filter(
    lambda c: c.out_dtype == "float32" and any(c.local_rows()))


def out_rounded_to_bf16(lhs, rhs, group_sizes, pet, *rest):
    """Planted: the float32 result is stored through bfloat16."""
    return kernel.gmm(lhs, rhs, group_sizes, pet, *rest).astype(jnp.bfloat16).astype(pet)


def _run(impl):
    family = dataclasses.replace(get_family("megablox-gmm"), cases=lambda: F32_OUT)
    settings(max_examples=3, deadline=None, database=None, derandomize=True,
             phases=(Phase.generate,), suppress_health_check=list(HealthCheck))(
        matches_reference(family, backend=BACKEND, impl=impl))()


def test_a_float32_out_rounded_to_bfloat16_fails():
    with pytest.raises(HarnessFailure, match="calibrated"):
        _run(out_rounded_to_bf16)


# Nightly: the pristine kernel; its goldens run per push.
@pytest.mark.nightly
def test_the_kernel_passes_the_same_cases():
    _run(None)
