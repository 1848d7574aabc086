"""Constant rows (every element equal: variance exactly 0) are part of gpu-norm's problem:
the strategy draws them (mixed with ordinary rows, zero rows, large magnitudes), every ci
run's cover reaches them, the reference and the pristine kernel agree there, and a kernel
that is wrong only on them fails (issue 55, item 6)."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, settings

from kernel_harness import get_family, resolve_backend
from kernel_harness.checks.matches_reference import check_case
from kernel_harness.checks.properties import HarnessFailure, matches_reference
from kernel_harness.families.gpu_norm import kernel
from kernel_harness.ops.norm.cases import NormCase, norm_cases
from kernel_harness.ops.norm.reference import reference
from kernel_harness.run.profiles import get_profile
from tests.helpers.mode_reach import assert_cover_runs, assert_reaches, family_reach

BACKEND = resolve_backend("interpret")
FAMILY = get_family("gpu-norm")
#: Float32 layer_norm at offset 300: constant rows 3 sqrt(eps) from 0 (their own scale:
#: the output divides by sqrt(eps) alone there) beside ordinary rows 300 spreads from 0.
BIG = NormCase(dtype="float32", seed=7, op="layer_norm", leading=(3, 11), n=257, eps=1e-5,
               spread=30.0, offset=300.0, constant_rows="some")


def test_ci_sized_draws_reach_constant_rows_of_every_kind():
    assert_reaches(family_reach("gpu-norm"), ("constant-rows", "zero-rows",
                                              "constant-and-ordinary-rows"), "gpu-norm")


@pytest.mark.parametrize("run_seed", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("examples", [8, get_profile("ci").max_examples])
def test_the_modes_first_cover_runs_a_constant_row_case(run_seed, examples):
    assert_cover_runs(FAMILY, ["constant-rows"], run_seed=run_seed, examples=examples)


def test_a_seed_case_holds_large_constant_rows_beside_ordinary_ones():
    (case,) = [c for c in FAMILY.seed_cases(frozenset()) if c.constant_rows != "none"]
    x = case.materialize()["x"].reshape(case.rows, case.n)
    constant = case.constant_mask().reshape(-1)
    assert constant.any() and not constant.all()
    assert (x[constant] == x[constant][:, :1]).all()
    assert (x[~constant].std(axis=-1) > 1).all()


@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("kind", ["some", "zero"])
def test_constant_rows_are_constant_and_the_others_ordinary(kind, op):
    case = dataclasses.replace(BIG, dtype="bfloat16", offset=2.0, constant_rows=kind, op=op)
    x = np.asarray(case.materialize()["x"], np.float64).reshape(case.rows, case.n)
    constant = case.constant_mask().reshape(-1)
    assert constant.tolist() == [r % 2 == (kind == "some") for r in range(case.rows)]
    assert (x[constant] == x[constant][:, :1]).all()
    assert (x[~constant].std(axis=-1) > 1).all()
    if kind == "zero":
        assert not x[constant].any()


def test_a_lone_row_is_constant_only_as_zeros():
    lone = dataclasses.replace(BIG, leading=(1, 1))
    assert not lone.constant_mask().any()
    assert dataclasses.replace(lone, constant_rows="zero").constant_mask().all()


@pytest.mark.parametrize("op, dtype, offset, lo, hi", [
    ("layer_norm", "float32", 300.0, 2.5, 3.5),  # capped: in units of sqrt(eps)
    ("layer_norm", "float32", -40.0, 2.5, 3.5),
    ("layer_norm", "bfloat16", 2.0, 1.5, 2.5),
    ("rms_norm", "float32", 300.0, 300 * 30 * 0.99, 300 * 30 * 1.01),  # the rows' mean
])
def test_constant_rows_sit_at_their_own_scale(op, dtype, offset, lo, hi):
    case = dataclasses.replace(BIG, op=op, dtype=dtype, offset=offset)
    x = np.asarray(case.materialize()["x"], np.float64)[case.constant_mask()]
    unit = np.sqrt(case.eps) if op == "layer_norm" else 1.0
    assert lo < np.abs(x).max() / unit < hi


def test_none_keeps_the_arrays_of_cases_stored_before_constant_rows():
    plain = dataclasses.replace(BIG, constant_rows="none")
    rng = plain.rng()
    jitter = rng.standard_normal((3, 11, 1)) * 0.1
    expected = 30.0 * (300.0 + jitter + rng.standard_normal((3, 11, 257)))
    np.testing.assert_array_equal(plain.materialize()["x"], expected.astype(np.float32))


def test_the_reference_gives_the_bias_and_rsqrt_eps_on_constant_rows():
    inputs = BIG.materialize()
    out = reference(BIG, inputs)
    constant = BIG.constant_mask()
    bias = np.broadcast_to(inputs["bias"], out["out"].shape)
    np.testing.assert_array_equal(out["out"][constant], bias[constant])
    g = inputs["do"].astype(np.float64) * inputs["weight"]
    dx = (g - g.mean(-1, keepdims=True)) / np.sqrt(BIG.eps)
    np.testing.assert_allclose(out["dx"][constant], dx[constant], rtol=1e-6, atol=1e-3)


@pytest.mark.parametrize("case", [
    BIG,
    *[c for c in FAMILY.seed_cases(frozenset()) if c.constant_rows != "none"],
    dataclasses.replace(BIG, op="rms_norm", constant_rows="zero", eps=1e-6, n=4097),
    dataclasses.replace(BIG, op="rms_norm", leading=(1, 17), eps=1e-6),
    dataclasses.replace(BIG, dtype="bfloat16", offset=2.0, leading=(1, 1),
                        constant_rows="zero", n=200),
    dataclasses.replace(BIG, dtype="float16", spread=1e-2, offset=-1.0, eps=1e-6, n=129),
    dataclasses.replace(BIG, spread=1e-2, offset=3.0, eps=0.1, n=4097),  # eps-dominated
], ids=["f32-offset-300", "seed-case", "rms-zero-long", "rms-large", "bf16-lone-zero-row",
        "f16-small-eps", "beside-eps-dominated-rows"])
# Nightly: the pristine kernel; its goldens run per push.
@pytest.mark.nightly
def test_the_pristine_kernel_passes_on_constant_rows(case):
    result = check_case(FAMILY, case, BACKEND, None)
    assert result.passed, [v.stats.output for v in result.failures]


def zero_on_constant_rows(op, x, weight, bias, *, eps, interpret):
    """The real kernel, but rows of two or more equal elements come back as zeros."""
    out = kernel.norm(op, x, weight, bias, eps=eps, interpret=interpret)
    if x.shape[-1] < 2:
        return out
    const = (x.max(-1, keepdims=True) == x.min(-1, keepdims=True))
    return jnp.where(const, jnp.zeros_like(out), out)


def test_a_kernel_wrong_only_on_constant_rows_fails_on_out():
    family = dataclasses.replace(FAMILY, seed_cases=lambda without: ())
    strategy = norm_cases().filter(lambda c: "constant-rows" in FAMILY.events(c))
    prop = settings(max_examples=2, deadline=None, database=None, derandomize=True,
                    phases=(Phase.generate,), suppress_health_check=list(HealthCheck))(
        matches_reference(dataclasses.replace(family, cases=lambda: strategy),
                          backend=BACKEND, impl=zero_on_constant_rows))
    with pytest.raises(HarnessFailure) as info:
        prop()
    assert "out" in {v.stats.output for v in info.value.result.failures}
