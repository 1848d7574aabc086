"""The tpu-ragged-paged reference against a case computed by hand and against numpy loops."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kernel_harness.families.tpu_ragged_paged.cases import RaggedCase, ragged_seed_cases
from kernel_harness.families.tpu_ragged_paged.family import reference
from kernel_harness.ops.paged_attention.ragged import allowed


def _tiny() -> RaggedCase:
    return RaggedCase(dtype="float32", seed=0, q_lens=(1, 2), kv_lens=(2, 2), max_num_seqs=3,
                      max_tokens=4, q_heads=1, kv_heads=1, head_dim=1, page_size=2,
                      pages_per_seq=1, kv_pages_per_block=1, queries_per_block=2)


def test_tiny_case_by_hand():
    """Decode (q_len 1, kv_len 2) then a prefill of 2 over an empty cache, one head, d=1.

    Sequence 0 (page 3): keys 0, ln 3; values 10, 20; query 1 at position 1 sees both:
    softmax(0, ln 3) = (1/4, 3/4) -> 17.5. Sequence 1 (page 2): keys 0, 0; values 4, 8;
    query at position 0 sees key 0 only -> 4; query at position 1 sees both -> 6.
    """
    case = _tiny()
    pages = np.zeros((case.total_pages, 2, 2, 1), np.float32)
    pages[3, :, 0, 0] = [0.0, np.log(3.0)]  # K of sequence 0
    pages[3, :, 1, 0] = [10.0, 20.0]  # V
    pages[2, :, 1, 0] = [4.0, 8.0]
    pages[0] = np.nan  # a page nobody owns
    inputs = {
        "q": np.array([[[1.0]], [[3.0]], [[-2.0]], [[9.0]]], np.float32),
        "kv_pages": pages,
        "kv_lens": np.array([2, 2, 1], np.int32),
        "page_indices": np.array([[3], [2], [1]], np.int32),
        "cu_q_lens": np.array([0, 1, 3, 4], np.int32),
        "num_seqs": np.array([2], np.int32),
    }
    out = reference(case, inputs)["out"][:, 0, 0]
    np.testing.assert_allclose(out, [17.5, 4.0, 6.0, 0.0], rtol=1e-6)


def test_window_and_soft_cap_by_hand():
    """Window 1: each query sees only its own key. Soft cap 1 on logits (0, 5):
    (0, tanh 5)."""
    assert allowed(2, 3, 1).tolist() == [[False, True, False], [False, False, True]]
    assert allowed(1, 3, None).tolist() == [[True, True, True]]
    case = dataclasses.replace(_tiny(), q_lens=(1,), kv_lens=(2,), max_tokens=1,
                               soft_cap=1.0)
    pages = np.zeros((case.total_pages, 2, 2, 1), np.float32)
    pages[1, :, 0, 0] = [0.0, 5.0]
    pages[1, :, 1, 0] = [0.0, 1.0]
    inputs = {"q": np.ones((1, 1, 1), np.float32), "kv_pages": pages,
              "page_indices": np.array([[1], [0], [2]], np.int32)}
    p1 = np.exp(np.tanh(5.0)) / (1 + np.exp(np.tanh(5.0)))
    np.testing.assert_allclose(reference(case, inputs)["out"][0, 0, 0], p1, rtol=1e-6)


def _by_loops(case: RaggedCase, x: dict[str, np.ndarray]) -> np.ndarray:
    q = np.asarray(x["q"], np.float64)
    pages = np.asarray(x["kv_pages"], np.float64)
    out = np.zeros(q.shape)
    ratio = case.q_heads // case.kv_heads
    row = 0
    for i, (q_len, kv_len) in enumerate(zip(case.q_lens, case.kv_lens, strict=True)):
        for j in range(q_len):
            pos = kv_len - q_len + j
            for h in range(case.q_heads):
                logits, values = [], []
                for t in range(kv_len):
                    if t > pos or (case.sliding_window and t <= pos - case.sliding_window):
                        continue
                    page = x["page_indices"][i, t // case.page_size]
                    token = pages[page, t % case.page_size]
                    s = case.sm_scale * q[row, h] @ token[2 * (h // ratio)]
                    if case.soft_cap:
                        s = case.soft_cap * np.tanh(s / case.soft_cap)
                    logits.append(s)
                    values.append(token[2 * (h // ratio) + 1])
                w = np.exp(np.array(logits) - max(logits))
                out[row, h] = (w / w.sum()) @ np.array(values)
            row += 1
    return out


@pytest.mark.parametrize("case", ragged_seed_cases())
def test_reference_matches_loops_on_the_seed_cases(case):
    x = case.materialize()
    assert np.isnan(x["kv_pages"]).any()  # poisoned: unowned slots are NaN
    ref = reference(case, x)["out"]
    assert np.isfinite(ref).all()
    np.testing.assert_allclose(ref, _by_loops(case, x), rtol=1e-5, atol=1e-5)


def test_case_draws_consistent_metadata():
    case = ragged_seed_cases()[0]
    x = case.materialize()
    cu, kv, table = x["cu_q_lens"], x["kv_lens"], x["page_indices"]
    assert cu.shape == (case.max_num_seqs + 1,) and kv.shape == (case.max_num_seqs,)
    assert list(cu[: case.num_seqs + 1]) == [0, *np.cumsum(case.q_lens)]
    assert list(kv[: case.num_seqs]) == list(case.kv_lens)
    assert len(set(table.ravel())) == table.size  # distinct pages
    assert table.max() < case.total_pages


def test_case_rejects_invalid_shapes():
    base = _tiny()
    with pytest.raises(ValueError, match="kv_len must be >= q_len"):
        dataclasses.replace(base, q_lens=(3, 2))
    with pytest.raises(ValueError, match="does not fit"):
        dataclasses.replace(base, kv_lens=(3, 2))
    with pytest.raises(ValueError, match="max_tokens"):
        dataclasses.replace(base, max_tokens=2)
    with pytest.raises(ValueError, match="max_num_seqs"):
        dataclasses.replace(base, max_num_seqs=1)
    with pytest.raises(ValueError, match="float32"):
        dataclasses.replace(base, dtype="float16")
