"""The identity affine (weight all ones, bias all zeros: how models initialise a norm) is
part of gpu-norm's problem (adversarial round 3: a norm wrong only there passed while only
random weights and biases were drawn): ci-sized draws and every ci cover reach it, the
arrays are what the field says, and the pristine kernels pass it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kernel_harness import get_family, resolve_backend
from kernel_harness.checks.matches_reference import check_case
from kernel_harness.ops.norm.cases import NormCase
from kernel_harness.run.profiles import get_profile
from tests.helpers.mode_reach import assert_cover_runs, assert_reaches, family_reach

BACKEND = resolve_backend("interpret")
FAMILY = get_family("gpu-norm")
CASE = NormCase(dtype="float32", seed=3, op="layer_norm", leading=(3, 11), n=257, eps=1e-5,
                spread=1.0, offset=3.0, affine="identity")


def test_ci_sized_draws_reach_the_identity_affine():
    assert_reaches(family_reach("gpu-norm"), ("identity-affine",), "gpu-norm")


@pytest.mark.parametrize("run_seed", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("examples", [8, get_profile("ci").max_examples])
def test_the_modes_first_cover_runs_an_identity_affine_case(run_seed, examples):
    assert_cover_runs(FAMILY, ["identity-affine"], run_seed=run_seed, examples=examples)


def test_identity_is_ones_and_zeros_and_keeps_x_and_do():
    ident, plain = CASE.materialize(), dataclasses.replace(CASE, affine="random").materialize()
    assert (ident["weight"] == 1).all() and (ident["bias"] == 0).all()
    assert not (plain["weight"] == 1).all()
    for name in ("x", "do"):
        np.testing.assert_array_equal(ident[name], plain[name])
    with pytest.raises(ValueError, match="affine must be one of"):
        dataclasses.replace(CASE, affine="ones")


@pytest.mark.parametrize("case", [
    CASE,
    dataclasses.replace(CASE, op="rms_norm"),
    dataclasses.replace(CASE, dtype="bfloat16", offset=2.0, constant_rows="zero", n=4097),
    dataclasses.replace(CASE, dtype="float16", op="rms_norm", leading=(1, 1), n=1),
], ids=["f32-layer", "f32-rms", "bf16-zero-rows-long", "f16-one-element"])
# Nightly: the pristine kernel; its goldens run per push.
@pytest.mark.nightly
def test_the_pristine_kernel_passes_the_identity_affine(case):
    result = check_case(FAMILY, case, BACKEND, None)
    assert result.passed, [v.stats.output for v in result.failures]
