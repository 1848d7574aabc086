"""The out of gpu-mha's residuals call (``return_residuals=True``: out and lse) is judged
as ``out`` (adversarial round 3: an mha returning zeros for that out passed, since only
its lse was kept), so a kernel wrong there fails naming ``out_residuals``; the real
kernel passes."""

from __future__ import annotations

import json
from pathlib import Path

import jax.numpy as jnp
import pytest

from kernel_harness import get_family, resolve_backend
from kernel_harness.checks.matches_reference import check_case
from kernel_harness.families.gpu_mha import kernel
from kernel_harness.families.gpu_mha.cases import MhaCase

BACKEND = resolve_backend("interpret")
FAMILY = get_family("gpu-mha")
GOLDEN = Path(__file__).resolve().parents[3] / "golden" / "gpu-mha" / "cases.json"


def _cases() -> list[MhaCase]:
    stored = json.loads(GOLDEN.read_text())["cases"]
    return [MhaCase.from_json(json.dumps(c["case"])) for c in stored]


def residuals_out_zero(q, k, v, segment_ids, *, return_residuals=False, **kwargs):
    """The real kernels, but the residuals call's out is zeros."""
    if return_residuals:
        out, lse = kernel.mha(q, k, v, segment_ids, return_residuals=True, **kwargs)
        return jnp.zeros_like(out), lse
    return kernel.mha(q, k, v, segment_ids, **kwargs)


def test_the_residuals_out_is_judged_as_out():
    assert FAMILY.same_as == {"out_residuals": "out"}


@pytest.mark.parametrize("index", [0, 1])
def test_a_zero_residuals_out_fails_naming_it_and_the_kernel_passes(index):
    case = _cases()[index]
    wrong = check_case(FAMILY, case, BACKEND, residuals_out_zero)
    assert {v.stats.output for v in wrong.failures} == {"out_residuals"}
    right = check_case(FAMILY, case, BACKEND, None)
    assert right.passed, [v.stats.output for v in right.failures]
