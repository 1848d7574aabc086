"""tpu-inference's ragged paged attention v3 for head_dim 64 (issue 37): its cache layout
(K | V in one 128-lane row, padding heads zeroed where written), the op's sinks against a
float64 softmax, the sizes its finding excludes never drawn, no backend where jax lacks
pltpu.reciprocal, and the pristine kernel passing its seed cases where it runs. (Both
stacks: conftest.BOTH_STACKS; on jax 0.10.2 the kernel tests skip, saying why.)"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

from kernel_harness.core import compat
from kernel_harness.core.backends import resolve_backend
from kernel_harness.families.tpu_inference_rpa_hd64.cases import (
    HEAD_DIM,
    RpaHd64Case,
    sinks_supported,
)
from kernel_harness.ops.paged_attention.ragged import ragged_attention
from kernel_harness.records.registry import get_family
from kernel_harness.run.runner import check_case
from tests.helpers.golden_export import golden_cases, reference_agrees
from tests.helpers.libraries import tpu_inference_installed_or_skip

NAME = "tpu-inference-rpa-v3-hd64"
CASE = RpaHd64Case(dtype="bfloat16", seed=3, q_lens=(2, 1), kv_lens=(9, 4), max_num_seqs=2,
                   max_tokens=4, q_heads=3, kv_heads=3, page_size=8, pages_per_seq=2,
                   sinks=False)


def test_new_tokens_land_as_k_then_v_in_one_row_and_zero_the_padding_head():
    inputs = CASE.materialize()
    assert inputs["kv_cache"].shape == (CASE.total_pages, 8, 2, 2, 2 * HEAD_DIM)
    cache = CASE.updated_cache(inputs).astype(np.float32)
    rows = cache.reshape(CASE.total_pages, 8, 4, 2 * HEAD_DIM)
    old = np.asarray(inputs["kv_cache"], np.float32).reshape(rows.shape)
    written = CASE.new_tokens()
    for row, page, slot in written:
        np.testing.assert_array_equal(rows[page, slot, :3, :HEAD_DIM],
                                      np.asarray(inputs["k"][row], np.float32))
        np.testing.assert_array_equal(rows[page, slot, :3, HEAD_DIM:],
                                      np.asarray(inputs["v"][row], np.float32))
        assert not rows[page, slot, 3].any()  # the padding head of a written word
    untouched = np.ones(rows.shape[:2], bool)
    for _, page, slot in written:
        untouched[page, slot] = False
    np.testing.assert_array_equal(rows[untouched], old[untouched])
    k, v = CASE.sequence_kv(cache, 0)
    assert k.shape == v.shape == (9, 3, HEAD_DIM)


def test_sinks_take_weight_and_give_no_value():
    """ragged_attention's sinks against a float64 softmax with one extra logit per head."""
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal(s) for s in ((3, 2, 8), (5, 1, 8), (5, 1, 8)))
    sinks = np.array([0.5, 3.0])
    out = ragged_attention(q, [(k, v)], [3], [5], sm_scale=0.5, soft_cap=None, window=None,
                           sinks=sinks)
    for i in range(3):
        for h in range(2):
            s = 0.5 * k[:, 0] @ q[i, h]
            s[np.arange(5) > 2 + i] = -np.inf  # bottom-right causal
            m = max(s.max(), sinks[h])
            w = np.exp(s - m)
            expected = w @ v[:, 0] / (w.sum() + np.exp(sinks[h] - m))
            np.testing.assert_allclose(out[i, h], expected, rtol=1e-5, atol=1e-6)


@settings(max_examples=60, deadline=None, database=None)
@given(case=get_family(NAME).cases())
def test_sinks_are_drawn_only_where_the_kernel_takes_them(case):
    if case.sinks:
        assert sinks_supported(case.dtype, case.q_heads // case.kv_heads)
    assert not sinks_supported("bfloat16", 1) and sinks_supported("float32", 1)


def test_no_backend_where_jax_lacks_reciprocal():
    tpu_inference_installed_or_skip()
    family = get_family(NAME)
    assert bool(family.backends) == compat.pallas_tpu_has("reciprocal")
    assert "jax >= 0.11" in family.requires


@pytest.mark.slow  # 15 s on jax 0.12: per push on the first stack only
def test_the_exported_scripts_reference_is_the_harness_reference(tmp_path):
    """The export contract (tests/families/test_export_contract.py skips this family where
    it has no backend) on the stack where it runs, on every golden case (the fp8 cache,
    quantized q and sinks paths of the embedded reference included)."""
    tpu_inference_installed_or_skip()
    if not compat.pallas_tpu_has("reciprocal"):
        pytest.skip("the kernel needs pltpu.reciprocal (jax >= 0.11); this jax lacks it")
    worst = {c.to_json(): reference_agrees(NAME, tmp_path, c) for c in golden_cases(NAME)}
    assert len(worst) >= 3 and max(worst.values()) <= 1e-6, worst


# Nightly: the pristine kernel; its golden cases run per push (the second stack's
# `gate --goldens` in .ci/run).
@pytest.mark.nightly
def test_the_pristine_kernel_passes_its_seed_cases():
    tpu_inference_installed_or_skip()
    if not compat.pallas_tpu_has("reciprocal"):
        pytest.skip("the kernel needs pltpu.reciprocal (jax >= 0.11); this jax lacks it")
    family, backend = get_family(NAME), resolve_backend("interpret")
    for case in family.seed_cases(frozenset()):
        result = check_case(family, case, backend)
        assert result.passed, [v.problems for v in result.verdicts]
