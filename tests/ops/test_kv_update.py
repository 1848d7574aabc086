"""ops/paged_attention/kv_update.py: the vocabulary, exact cache update and reference of
ragged paged attention calls that write the new tokens' K/V first (one rule for rpa v3
and its head-dim-64 variant; their layouts come from the cases)."""

from __future__ import annotations

import numpy as np
import pytest

from kernel_harness.families.tpu_inference_rpa_v3.cases import RpaV3Case
from kernel_harness.ops.paged_attention.kv_update import FP8, kv_update_reference

BASE = dict(dtype="float32", seed=5, q_lens=(1, 2), kv_lens=(1, 6), max_num_seqs=3,
            max_tokens=4, q_heads=4, kv_heads=2, head_dim=64, page_size=8, pages_per_seq=2)


def test_new_tokens_are_written_in_the_cases_layout_and_nothing_else_changes():
    case = RpaV3Case(**BASE)
    inputs = case.materialize()
    cache = case.updated_cache(inputs)
    old = np.asarray(inputs["kv_cache"])
    rows = cache.reshape(*cache.shape[:2], -1, cache.shape[-1])
    written = np.zeros(cache.shape[:2], bool)
    for row, page, slot in case.new_tokens():
        np.testing.assert_array_equal(rows[page, slot, 0:4:2, :64], inputs["k"][row])
        np.testing.assert_array_equal(rows[page, slot, 1:4:2, :64], inputs["v"][row])
        written[page, slot] = True
    assert written.sum() == sum(case.q_lens)
    np.testing.assert_array_equal(cache[~written], old[~written])


def test_sequence_kv_reads_the_sequence_dequantized():
    case = RpaV3Case(**BASE, kv_dtype=FP8, k_scale=0.25, v_scale=0.5)
    inputs = case.materialize()
    cache = case.updated_cache(inputs)
    k, v = case.sequence_kv(cache, 1)
    assert k.shape == v.shape == (6, 2, 64)
    last_row = sum(case.q_lens) - 1  # the second sequence's last new token
    np.testing.assert_array_equal(k[-1], np.asarray(inputs["k"][last_row], np.float32) * 0.25)
    np.testing.assert_array_equal(v[-1], np.asarray(inputs["v"][last_row], np.float32) * 0.5)


def test_a_query_with_one_key_gets_that_keys_value():
    """Sequence 0 is one new token over an empty cache: softmax over one key is 1, so its
    output is its own V (dequantized), whatever q and K are."""
    case = RpaV3Case(**BASE, kv_dtype=FP8, v_scale=0.5)
    inputs = case.materialize()
    expected = kv_update_reference(case, inputs)
    v = np.asarray(inputs["v"][0], np.float32) * 0.5  # [kv_heads, d]
    np.testing.assert_allclose(expected["out"][0], np.repeat(v, 2, axis=0), rtol=1e-6)
    np.testing.assert_array_equal(expected["kv_cache"],
                                  case.updated_cache(inputs).astype(np.float32))


@pytest.mark.parametrize(("fields", "message"), [
    (dict(dtype="float16"), "takes dtypes"),
    (dict(kv_dtype="int8"), "kv_dtype must be None"),
    (dict(k_scale=0.0), "k_scale must be > 0"),
    (dict(q_scale=0.5), "q_scale needs an fp8 cache"),
    (dict(kv_dtype=FP8, q_scale=0.3), "power of two"),
    (dict(q_heads=3), "q_heads"),
])
def test_bad_fields_are_clear_errors(fields, message):
    with pytest.raises(ValueError, match=message):
        RpaV3Case(**{**BASE, **fields})


def test_a_case_that_gives_no_head_dim_is_refused_saying_so():
    import dataclasses

    from kernel_harness.ops.paged_attention.kv_update import KvUpdateCase

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class NoHeadDim(KvUpdateCase):
        pass

    fields = {k: v for k, v in BASE.items() if k != "head_dim"}
    with pytest.raises(TypeError, match="NoHeadDim must give head_dim"):
        NoHeadDim(**fields)
    with pytest.raises(ValueError, match="head_dim"):
        RpaV3Case(**{**BASE, "head_dim": 0})
