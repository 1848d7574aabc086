"""Kernel finding (written in the family contract): a kv_len 0 sequence inside num_seqs
corrupts the next sequence's output. This test holds while the finding does; when an
upstream fix makes it fail, move the finding to the contract's history and let the
strategy draw kv_len 0."""

from __future__ import annotations

import numpy as np
import pytest

from kernel_harness import get_family, resolve_backend
from kernel_harness.families.tpu_ragged_paged.cases import RaggedCase

BACKEND = resolve_backend("interpret")


def _case(q_lens, kv_lens, poison):
    return RaggedCase(dtype="float32", seed=3, q_lens=q_lens, kv_lens=kv_lens, max_num_seqs=5,
                      max_tokens=10, q_heads=2, kv_heads=1, page_size=4,
                      pages_per_seq=3, kv_pages_per_block=2, queries_per_block=4,
                      poison=poison)


def _errors(case):
    fam = get_family("tpu-ragged-paged")
    x = case.materialize()
    out = fam.run(fam.kernel, case, x, BACKEND)["out"]
    ref = fam.reference(case, x)["out"]
    n = case.total_tokens
    return np.abs(out[:n] - ref[:n]).max(axis=(1, 2))  # per query row


@pytest.mark.parametrize("q_lens,kv_lens", [((0, 3), (0, 7)), ((1, 0, 3), (1, 0, 7))])
def test_kv_len_zero_sequence_corrupts_the_next_one(q_lens, kv_lens):
    rows = _errors(_case(q_lens, kv_lens, poison=False))
    first_after = sum(q_lens[:q_lens.index(0)])
    assert (rows[:first_after] < 1e-5).all()  # sequences before the empty one are right
    assert (rows[first_after:] > 0.1).all()  # the next sequence is wrong


def test_q_len_zero_with_cached_keys_is_fine_and_an_empty_last_sequence_too():
    assert (_errors(_case((0, 3), (5, 7), poison=True)) < 1e-5).all()
    assert (_errors(_case((3, 0), (3, 0), poison=True)) < 1e-5).all()
