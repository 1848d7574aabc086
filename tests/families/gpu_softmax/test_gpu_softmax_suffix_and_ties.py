"""gpu-softmax draws masked suffixes, masked blocks anywhere in a row, and rows whose
maximum is tied (float32 included), besides masked prefixes (adversarial round 3: a
softmax wrong only on rows ending in -inf, or only on float32 rows with a tied max,
passed while neither was drawn). Every ci run's modes-first cover reaches them, the
arrays are what the fields say, and the real kernel passes them."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings

from kernel_harness import get_family, resolve_backend
from kernel_harness.checks.matches_reference import check_case
from kernel_harness.checks.modes import modes_of
from kernel_harness.ops.softmax.cases import SoftmaxCase, softmax_cases, softmax_data_draws
from kernel_harness.ops.softmax.reference import reference
from kernel_harness.run.profiles import get_profile
from tests.helpers.mode_reach import assert_cover_runs, assert_reaches, family_reach

BACKEND = resolve_backend("interpret")
FAMILY = get_family("gpu-softmax")
NEW = ("masked-suffix", "masked-block", "tied-max")
#: float32 rows of 300: a prefix, a block inside and a suffix masked, 3 maxima tied.
ALL = SoftmaxCase(dtype="float32", seed=4, leading=(2, 3), n=300, masked_prefix=5,
                  masked_suffix=128, masked_block=(40, 20), tied_max=3)


def test_ci_sized_draws_reach_suffixes_blocks_and_ties():
    assert_reaches(family_reach("gpu-softmax"), NEW, "gpu-softmax")


@pytest.mark.parametrize("run_seed", [0, 1, 2, 3, 4])
def test_the_ci_cover_runs_a_masked_suffix(run_seed):
    assert_cover_runs(FAMILY, ["masked-suffix", "masked-block", "tied-max"], run_seed=run_seed,
                      examples=get_profile("ci").max_examples)


def test_a_float32_tie_is_the_only_non_degenerate_one():
    low = dataclasses.replace(ALL, dtype="bfloat16")
    assert "tied-max" in modes_of(FAMILY, ALL)
    assert "tied-max" not in modes_of(FAMILY, low)
    assert {"masked-suffix", "masked-block"} <= modes_of(FAMILY, low)


def test_the_masks_and_ties_are_where_the_fields_say():
    x = ALL.materialize()["x"].reshape(ALL.rows, ALL.n)
    masked = np.zeros(ALL.n, bool)
    masked[:5] = masked[40:60] = masked[-128:] = True
    assert np.isneginf(x[:, masked]).all() and np.isfinite(x[:, ~masked]).all()
    assert ((x == x.max(-1, keepdims=True)).sum(-1) == 3).all()
    out = reference(ALL, {"x": x})["out"]
    assert (out[:, masked] == 0).all() and np.allclose(out.sum(-1), 1.0, rtol=1e-6)


def test_a_row_tied_everywhere_is_uniform_and_no_tie_keeps_the_old_arrays():
    kept = len(ALL.kept_lanes())
    flat = dataclasses.replace(ALL, tied_max=kept).materialize()["x"].reshape(ALL.rows, -1)
    finite = flat[:, ~ALL.masked_lanes()]
    assert (finite == finite[:, :1]).all()
    plain = SoftmaxCase(dtype="float32", seed=4, leading=(2, 3), n=300)
    z = plain.rng().standard_normal((2, 3, 300)).astype(np.float32)
    np.testing.assert_array_equal(plain.materialize()["x"], z)


@pytest.mark.parametrize("fields, match", [
    ({"masked_prefix": 150, "masked_suffix": 150}, "no finite logit"),
    ({"masked_block": (290, 20)}, "inside the row"),
    ({"masked_suffix": 299, "tied_max": 2}, "tied_max must be"),
])
def test_invalid_masks_and_ties_are_refused(fields, match):
    with pytest.raises(ValueError, match=match):
        SoftmaxCase(dtype="float32", seed=0, leading=(), n=300, **fields)


@settings(max_examples=60, deadline=None, database=None, derandomize=True,
          phases=(Phase.generate,), suppress_health_check=list(HealthCheck))
@given(softmax_cases())
def test_every_drawn_row_keeps_a_finite_logit(case):
    x = case.materialize()["x"].reshape(case.rows, case.n)
    assert np.isfinite(x).any(-1).all()


@settings(max_examples=30, deadline=None, database=None, derandomize=True,
          phases=(Phase.generate,), suppress_health_check=list(HealthCheck))
@given(softmax_data_draws(ALL))
def test_data_draws_keep_the_program(case):
    assert case.static_key() == ALL.static_key()


@pytest.mark.parametrize("case", [
    ALL,
    dataclasses.replace(ALL, dtype="bfloat16", offset=1000.0, tied_max=0),
    dataclasses.replace(ALL, dtype="float16", leading=(), masked_suffix=1, tied_max=2),
    SoftmaxCase(dtype="float32", seed=2, leading=(5,), n=129, scale=30.0, tied_max=129),
    SoftmaxCase(dtype="float32", seed=3, leading=(2, 1, 3), n=1025, masked_prefix=128,
                masked_suffix=128, masked_block=(500, 128), tied_max=2),
], ids=["f32-all", "bf16-offset-masks", "f16-rank1-last-logit", "f32-uniform",
        "f32-whole-blocks"])
def test_the_kernel_passes_suffixes_blocks_and_ties(case):
    result = check_case(FAMILY, case, BACKEND, None)
    assert result.passed, [v.stats.output for v in result.failures]
