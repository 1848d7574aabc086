"""flywheel-tpu-varlen-paged (issue 56, item 4): flywheel-tpu's flash_attn_varlen_func over
a paged cache on the ragged paged op. The case's merged layout, padding and poison, the
reference's masks and q rounding (no library needed); with flywheel-tpu (Python 3.12): a
small case passes, NaN past the lengths included (the decode kernel's finding is not this
kernel's), and the CI mutants are killed (every mutant: nightly)."""

from __future__ import annotations

import dataclasses
import math

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings

from kernel_harness.core.backends import resolve_backend
from kernel_harness.families.flywheel_tpu import merged_cache
from kernel_harness.families.flywheel_tpu_varlen_paged.cases import (
    FlywheelVarlenPagedCase,
    flywheel_varlen_paged_cases,
)
from kernel_harness.families.flywheel_tpu_varlen_paged.family import reference
from kernel_harness.ops.paged_attention.ragged import allowed
from kernel_harness.records.registry import get_family
from kernel_harness.run.runner import check_case
from tests.helpers.libraries import flywheel_installed_or_skip

NAME = "flywheel-tpu-varlen-paged"

#: GQA over two pages: a decode step past a page edge, a 3-token chunk, an inactive
#: sequence and two padding rows, NaN in the slots no sequence owns.
SMALL = FlywheelVarlenPagedCase(
    dtype="bfloat16", seed=5, q_lens=(1, 3), kv_lens=(129, 3), max_num_seqs=3, max_tokens=6,
    q_heads=4, kv_heads=2, page_size=128, pages_per_seq=2, soft_cap=20.0, sm_scale=0.3,
    past_length="nan")


def test_the_merged_cache_poisons_every_slot_no_active_sequence_owns():
    x = SMALL.materialize()
    k, v = merged_cache.split(x["kv_cache"])
    owned = SMALL.owned_slots()
    assert k.shape == (2, SMALL.total_pages, 128, 128) and owned.sum() == 129 + 3
    assert np.isfinite(k[:, owned]).all() and np.isnan(v[:, ~owned]).all()
    masked = dataclasses.replace(SMALL, past_length="masked").materialize()
    k, v = merged_cache.split(masked["kv_cache"])
    assert (k[:, ~owned] == 0).all() and (np.abs(v[:, ~owned]) == 1e3).all()
    assert x["num_active"].tolist() == [2] and x["seqused_k"][:2].tolist() == [129, 3]
    assert x["cu_seqlens_q"][:3].tolist() == [0, 1, 4] and x["q"].shape == (4, 6, 128)


def test_split_inverts_merged():
    k, v = (np.random.default_rng(i).standard_normal((3, 2, 4, 8)) for i in (0, 1))
    kk, vv = merged_cache.split(merged_cache.merged(k, v))
    np.testing.assert_array_equal(kk, k.astype(np.float32))
    np.testing.assert_array_equal(vv, v.astype(np.float32))


def test_masks_are_bottom_right_and_windows_cut_on_the_left():
    """The op's masks as the family asks them: a left window of w keys is window w + 1."""
    causal = allowed(2, 4, None, causal=True)
    assert causal.tolist() == [[True, True, True, False], [True, True, True, True]]
    assert allowed(2, 4, 1 + 1, causal=False).tolist() == [[False, True, True, True],
                                                           [False, False, True, True]]


def test_the_reference_rounds_q_as_the_library_and_leaves_padding_rows_zero():
    x = dataclasses.replace(SMALL, past_length="masked").materialize()
    out = reference(SMALL, x)["out"]
    assert out.shape == (4, 6, 128) and (out[:, 4:] == 0).all() and np.isfinite(out).all()
    fused = 0.3 / 20.0
    q = np.asarray(x["q"], np.float32)
    rounded = np.asarray(jnp.asarray(q * np.float32(fused), jnp.bfloat16), np.float32)
    np.testing.assert_allclose(merged_cache.rounded_q(q, 0.3, 20.0) * fused / 0.3, rounded,
                               rtol=1e-6)
    assert math.isclose(merged_cache.fused_scale(0.3, None), 0.3 * math.log2(math.e))


@settings(max_examples=30, deadline=None, database=None)
@given(flywheel_varlen_paged_cases(without=frozenset({"nan-past-lengths"})))
def test_the_strategy_draws_the_library_geometry(case):
    assert case.past_length == "masked" and case.page_size == 128 and case.dtype == "bfloat16"
    assert case.head_dim % 128 == 0 and 1 <= case.pages_per_seq <= 3


def test_a_small_case_passes_with_nan_past_the_lengths():
    flywheel_installed_or_skip()
    result = check_case(get_family(NAME), SMALL, resolve_backend("interpret"))
    assert result.passed, [v.problems for v in result.verdicts]


@pytest.mark.nightly
def test_every_mutant_is_killed():
    """``mutate``'s runs: the control passes and every mutant is killed."""
    flywheel_installed_or_skip()
    from kernel_harness.families.flywheel_tpu_varlen_paged.mutants import MUTANTS
    from kernel_harness.regression import mutate

    results = mutate.run_many(NAME, [None, *MUTANTS], properties=("matches-reference",),
                              golden=False, first_kill=True)
    assert results[0].status == "PASS", results[0]
    assert [r.mutant for r in results[1:] if r.status != "KILLED"] == []
