"""ops.paged_attention.sequences: the ragged batch every ragged paged attention case shares."""

from __future__ import annotations

import numpy as np
import pytest

from kernel_harness.ops.paged_attention.passes import PassesCase
from kernel_harness.ops.paged_attention.sequences import RaggedBatch


def _batch(**over: object) -> RaggedBatch:
    fields = dict(dtype="float32", seed=3, q_lens=(1, 3), kv_lens=(5, 9), max_num_seqs=4,
                  max_tokens=6, page_size=4, pages_per_seq=3)
    fields.update(over)
    return RaggedBatch(**fields)


def test_operands_pad_past_the_active_sequences() -> None:
    case = _batch()
    cu = case.cu_q_lens()
    assert cu.shape == (5,) and cu[:3].tolist() == [0, 1, 4]
    assert (np.diff(cu[2:]) > 0).all()  # junk keeps growing past num_seqs
    kv = case.kv_lens_array()
    assert kv[:2].tolist() == [5, 9] and ((1 <= kv[2:]) & (kv[2:] <= case.capacity)).all()
    table = case.page_table()
    assert table.shape == (4, 3) and len(set(table.ravel().tolist())) == 12
    assert table.max() < case.total_pages == 13


def test_token_rows_are_the_active_queries() -> None:
    assert _batch().token_rows().tolist() == [True] * 4 + [False] * 2


def test_owned_slots_are_the_sequences_tokens() -> None:
    case = _batch()
    owned = case.owned_slots()
    assert owned.sum() == sum(case.kv_lens)
    for i in range(case.num_seqs):
        pages, slots = case.sequence_slots(i)
        assert owned[pages, slots].all()


def test_slots_by_sequence_are_each_sequences_slots_in_order() -> None:
    case = _batch()
    together = case.slots_by_sequence()
    assert len(together) == case.num_seqs
    for i, (pages, slots) in enumerate(together):
        np.testing.assert_array_equal(pages, case.sequence_slots(i)[0])
        np.testing.assert_array_equal(slots, case.sequence_slots(i)[1])


@pytest.mark.parametrize(("over", "message"), [
    (dict(kv_lens=(5,)), "one entry per active sequence"),
    (dict(q_lens=(0, 3)), "q_lens must be >= 1"),
    (dict(q_lens=(6, 3)), "kv_len must be >= q_len"),
    (dict(kv_lens=(5, 13)), "does not fit pages_per_seq=3 pages of 4"),
    (dict(max_num_seqs=1), "max_num_seqs"),
    (dict(max_tokens=3), "max_tokens=3 < sum"),
    (dict(sliding_window=0), "sliding_window"),
    (dict(soft_cap=0.0), "soft_cap"),
])
def test_bad_batches_say_what_is_wrong(over: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _batch(**over)


def test_passes_check_their_own_rules_on_top() -> None:
    fields = dict(dtype="float32", seed=0, q_lens=(1, 2), kv_lens=(3, 4), max_num_seqs=2,
                  max_tokens=3)
    assert PassesCase(**fields, decode_seqs=1).num_seqs == 2
    with pytest.raises(ValueError, match="decode pass"):
        PassesCase(**fields, decode_seqs=2)
    with pytest.raises(ValueError, match="q_lens must be >= 1"):
        PassesCase(**{**fields, "q_lens": (0, 2)})
