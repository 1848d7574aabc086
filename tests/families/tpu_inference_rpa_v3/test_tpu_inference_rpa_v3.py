"""tpu-inference's ragged paged attention v3 (issue 37): the pristine kernel passes on every
TPU generation it is told, the cache it returns is judged exactly (a kernel that skips the
cache update fails there alone), the generation is answered only inside the call, and the
strategy's cases are the kernel's valid inputs. (Planted bugs in the kernel's source:
families/tpu_inference_rpa_v3/mutants.py, ``kernel-harness mutate tpu-inference-rpa-v3``.)"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings

from kernel_harness.core.backends import resolve_backend
from kernel_harness.families.tpu_inference_rpa_v3 import kernel as adapter
from kernel_harness.families.tpu_inference_rpa_v3.cases import RpaV3Case, rpa_v3_cases
from kernel_harness.families.tpu_inference_rpa_v3.events import events
from kernel_harness.records.registry import get_family
from kernel_harness.run.runner import check_case
from tests.helpers.libraries import tpu_inference_installed_or_skip

NAME = "tpu-inference-rpa-v3"


def _first_seed() -> RpaV3Case:
    return get_family(NAME).seed_cases(frozenset())[0]


# Nightly: the pristine kernel; its goldens run per push.
@pytest.mark.nightly
def test_the_pristine_kernel_passes_told_another_generation():
    """The seed case runs on v6 in every check; here on v7 (operands placed in HBM: another
    program)."""
    version = 7
    tpu_inference_installed_or_skip()
    family = get_family(NAME)
    case = dataclasses.replace(_first_seed(), tpu_version=version)
    result = check_case(family, case, resolve_backend("interpret"))
    assert result.passed, [v.problems for v in result.verdicts]
    errors = {v.stats.output: v.stats.max_rel_err for v in result.verdicts}
    assert set(errors) == {"out", "kv_cache"}
    assert errors["kv_cache"] == 0.0 and errors["out"] < 1e-5, errors


def test_a_kernel_that_does_not_update_the_cache_fails_on_the_cache():
    tpu_inference_installed_or_skip()
    family = get_family(NAME)

    def stale_cache(*operands, **options):
        out, _ = adapter.ragged_paged_attention(*operands, **options)
        return out, operands[3]

    result = check_case(family, _first_seed(), resolve_backend("interpret"), impl=stale_cache)
    failed = {v.stats.output for v in result.verdicts if not v.passed}
    assert failed == {"kv_cache"}, [v.problems for v in result.verdicts]


def test_an_fp8_cache_with_scales_is_exact_and_a_dropped_scale_fails():
    """fp8 K/V with k/v scales and q quantized: the pristine kernel within the float32
    bound and its cache exact; a kernel told no k_scale (it then attends over the stored,
    unscaled keys) fails on out alone."""
    tpu_inference_installed_or_skip()
    family = get_family(NAME)
    case = dataclasses.replace(_first_seed(), kv_dtype="float8_e4m3fn", q_scale=0.25,
                               k_scale=0.05, v_scale=0.5)
    result = check_case(family, case, resolve_backend("interpret"))
    assert result.passed, [v.problems for v in result.verdicts]

    def no_k_scale(*operands, k_scale=None, **options):
        return adapter.ragged_paged_attention(*operands, **options)

    wrong = check_case(family, case, resolve_backend("interpret"), impl=no_k_scale)
    assert {v.stats.output for v in wrong.verdicts if not v.passed} == {"out"}


def test_the_generation_is_answered_only_inside_the_call():
    tpu_inference_installed_or_skip()
    module = adapter._MODULES["kernel"]
    before = module.get_tpu_version
    with adapter._assumed_tpu_version(module, 7):
        assert module.get_tpu_version() == 7
    assert module.get_tpu_version is before


@settings(max_examples=60, deadline=None, database=None)
@given(rpa_v3_cases())
def test_drawn_cases_are_valid_kernel_inputs(case):
    """The kernel's own dynamic_validate_inputs rules, restated from its source: every
    sequence 0 < q_len <= kv_len, its pages inside the cache, distribution ordered, the
    decode pass q_len 1; and the passes named in the events are the ones populated."""
    x = case.materialize()
    cu, kv, dist = x["cu_q_lens"], x["kv_lens"], x["distribution"]
    assert dist[0] <= dist[1] <= dist[2] == case.num_seqs <= len(kv)
    assert cu[dist[2]] <= x["q"].shape[0]
    table = x["page_indices"].reshape(case.max_num_seqs, case.pages_per_seq)
    for i in range(case.num_seqs):
        q_len = cu[i + 1] - cu[i]
        assert 0 < q_len <= kv[i]
        assert (table[i, : -(-kv[i] // case.page_size)] < x["kv_cache"].shape[0]).all()
    assert (np.diff(cu[: dist[0] + 1]) == 1).all()
    ev = events(case)
    assert ("decode-pass" in ev) == (dist[0] > 0) and ("mixed-pass" in ev) == (dist[2] > dist[1])
