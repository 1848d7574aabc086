"""tpu-inference's MLA v2 (issue 37): the pristine kernel passes with its cache judged
exactly, a kernel that skips the cache update fails there alone, the reference is the
attention op over [latent | rope] keys (checked here against a hand-written float64 MLA),
and bfloat16 is drawn only where this jax has the ``pltpu.reciprocal`` the kernel calls."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

from kernel_harness.core import compat
from kernel_harness.core.backends import resolve_backend
from kernel_harness.core.case import dtype_packing
from kernel_harness.families.tpu_inference_mla_v2 import kernel as adapter
from kernel_harness.families.tpu_inference_mla_v2.cases import (
    DRAWN_DTYPES,
    MlaV2Case,
    mla_v2_cases,
    updated_cache,
)
from kernel_harness.records.registry import get_family
from kernel_harness.run.runner import check_case
from tests.helpers.libraries import tpu_inference_installed_or_skip

NAME = "tpu-inference-mla-v2"


def _seed() -> MlaV2Case:
    return get_family(NAME).seed_cases(frozenset())[0]


# Nightly: the pristine kernel; its goldens run per push.
@pytest.mark.nightly
def test_the_pristine_kernel_passes_with_an_exact_cache():
    tpu_inference_installed_or_skip()
    result = check_case(get_family(NAME), _seed(), resolve_backend("interpret"))
    assert result.passed, [v.problems for v in result.verdicts]
    errors = {v.stats.output: v.stats.max_rel_err for v in result.verdicts}
    assert errors["cache_kv"] == 0.0 and errors["out"] < 1e-5, errors


# Nightly: rpa v3's same test runs per push.
@pytest.mark.nightly
def test_a_kernel_that_does_not_update_the_cache_fails_on_the_cache():
    tpu_inference_installed_or_skip()

    def stale_cache(*operands, **options):
        out, _ = adapter.mla_ragged_paged_attention(*operands, **options)
        return out, operands[4]

    result = check_case(get_family(NAME), _seed(), resolve_backend("interpret"),
                        impl=stale_cache)
    assert {v.stats.output for v in result.verdicts if not v.passed} == {"cache_kv"}


def test_the_reference_is_multi_head_latent_attention():
    """float64 MLA by hand: logits sm_scale * (ql_nope . c + q_pe . k_pe), causal and
    window from the query's position, softmax, times the latents c."""
    family, case = get_family(NAME), _seed()
    x = case.materialize()
    want = family.reference(case, x)["out"]
    cache = updated_cache(x["cache_kv"], case.new_tokens(), x["new_kv_c"],
                          x["new_k_pe"]).astype(np.float64)
    ql = np.asarray(x["ql_nope"], np.float64)
    qp = np.asarray(x["q_pe"], np.float64)
    pack, row = dtype_packing(case.dtype), 0
    for i, (q_len, kv_len) in enumerate(zip(case.q_lens, case.kv_lens, strict=True)):
        pages, slots = case.sequence_slots(i)
        tok = cache[pages, slots // pack, slots % pack]
        c, kpe = tok[:, :case.lkv_dim], tok[:, 128:128 + case.r_dim]
        for j in range(q_len):
            pos = kv_len - q_len + j
            keys = np.arange(kv_len)
            seen = (keys <= pos) & (keys > pos - (case.sliding_window or kv_len + 1))
            for h in range(case.q_heads):
                s = case.sm_scale * (c @ ql[h, row] + kpe @ qp[row, h])
                if case.soft_cap is not None:
                    s = case.soft_cap * np.tanh(s / case.soft_cap)
                w = np.where(seen, np.exp(s - s[seen].max()), 0.0)
                np.testing.assert_allclose(want[h, row], (w / w.sum()) @ c, atol=2e-5)
            row += 1


def test_bfloat16_is_drawn_exactly_where_the_kernel_can_run_it():
    assert ("bfloat16" in DRAWN_DTYPES) == compat.pallas_tpu_has("reciprocal")
    assert ("bfloat16" in get_family(NAME).modes) == ("bfloat16" in DRAWN_DTYPES)


@settings(max_examples=60, deadline=None, database=None)
@given(mla_v2_cases())
def test_drawn_cases_are_valid_kernel_inputs(case):
    """The kernel's validation, restated: 0 < q_len <= kv_len, pages inside the cache, the
    decode pass q_len 1, the mixed pass's queries split evenly; the cache's lanes hold
    [latent | pad | rope | pad]."""
    x = case.materialize()
    cu, kv, dist = x["cu_q_lens"], x["kv_lens"], x["distribution"]
    assert dist[0] <= dist[1] <= dist[2] == case.num_seqs
    assert (np.diff(cu[: dist[0] + 1]) == 1).all()
    for i in range(case.num_seqs):
        assert 0 < cu[i + 1] - cu[i] <= kv[i]
    assert case.queries_per_block[2] % case.mixed_q_split == 0
    assert x["cache_kv"].shape[-1] == 128 * (-(-case.lkv_dim // 128) - (-case.r_dim // 128))
    assert x["ql_nope"].shape == (case.q_heads, case.max_tokens, case.lkv_dim)
