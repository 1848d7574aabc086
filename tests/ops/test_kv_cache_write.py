"""The kv-cache write op (issue 57): its reference against a token-by-token loop written
here, the exact bits output, bad cases naming their field, and the strategy reaching the
hard paths. No kernel library needed (both stacks)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

from kernel_harness.ops.kv_cache_write.cases import (
    KvWriteCase,
    kv_write_events,
    kv_write_fields,
    reference,
)
from kernel_harness.ops.kv_cache_write.reference import cache_bits


def _case(**kw):
    fields = dict(dtype="bfloat16", seed=3, cache_lens=(5, 0, 14), new_lens=(6, 3, 0),
                  page_size=8, pages_per_seq=2, kv_heads=2, head_dim=4, spare_pages=1,
                  pad_rows=2)
    return KvWriteCase(**{**fields, **kw})


def _loop(case, inputs):
    """The write, one token at a time, from the op's words."""
    cache = np.array(inputs["kv_cache"])
    table, row = inputs["block_table"], 0
    for i, (start, n) in enumerate(zip(case.cache_lens, case.new_lens, strict=True)):
        for j in range(n):
            pos = start + j
            page, slot = table[i, pos // case.page_size], pos % case.page_size
            for h in range(case.kv_heads):
                cache[page, slot, 2 * h] = inputs["k"][row, h]
                cache[page, slot, 2 * h + 1] = inputs["v"][row, h]
            row += 1
    return cache


def test_the_reference_is_the_token_loop_and_nothing_else_moves():
    case = _case()
    inputs = case.materialize()
    want = _loop(case, inputs)
    got = reference(case, inputs)
    assert np.array_equal(got["kv_cache_bits"], cache_bits(want))
    assert np.array_equal(got["kv_cache"], want.astype(np.float32))
    changed = (cache_bits(want) != cache_bits(inputs["kv_cache"])).any(axis=(2, 3))
    assert changed.sum() == sum(case.new_lens)  # the new tokens' slots, no other


def test_the_poison_and_the_new_data_carry_signed_zeros_and_subnormals():
    inputs = _case(new_lens=(11, 16, 2), pages_per_seq=4, head_dim=64).materialize()
    for name in ("k", "kv_cache"):
        bits = inputs[name].view(np.uint16)
        assert (bits == 0x8000).any() and ((bits & 0x7F80) == 0).sum() > (bits == 0).sum()
    old = np.abs(inputs["kv_cache"].astype(np.float32))
    assert ((old >= 64) | (old < 1e-30)).all()


def test_the_bits_tell_minus_zero_from_zero():
    a = np.array([0.0, -0.0], np.float16)
    assert cache_bits(a).tolist() == [0.0, 32768.0]
    with pytest.raises(ValueError, match="16-bit"):
        cache_bits(np.zeros(2, np.float32))


@pytest.mark.parametrize(("change", "message"), [
    (dict(dtype="float32"), "dtype must be one of"),
    (dict(new_lens=(6, 3)), "one entry per sequence"),
    (dict(new_lens=(6, -1, 0)), "new_lens must be ints >= 0"),
    (dict(cache_lens=(15, 0, 14)), r"sequence\(s\) \[0\] exceed"),
    (dict(page_size=0), "page_size must be >= 1"),
    (dict(pad_rows=-1), "pad_rows must be >= 0"),
    (dict(new_lens=(0, 0, 0), pad_rows=0), "at least one row"),
])
def test_bad_cases_name_the_field(change, message):
    with pytest.raises(ValueError, match=message):
        _case(**change)


def test_the_strategy_reaches_the_hard_paths():
    seen: set[str] = set()

    @settings(max_examples=60, deadline=None, derandomize=True, database=None)
    @given(kv_write_fields(head_dims=(4,)))
    def draw(fields):
        case = KvWriteCase(**fields)
        assert case.rows >= 1
        seen.update(kv_write_events(case))

    draw()
    assert {"write-crosses-page", "ends-at-page-end", "starts-at-page-start",
            "zero-new-tokens", "multi-seq", "empty-prefix", "fills-whole-page",
            "decode-step", "pad-rows", "spare-pages"} <= seen
