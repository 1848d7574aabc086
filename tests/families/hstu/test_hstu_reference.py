"""The hstu reference against hand-computed numpy loops on tiny inputs."""

from __future__ import annotations

import math

import numpy as np

from kernel_harness.families.hstu.family import reference
from kernel_harness.ops.pointwise_attention import cases, masks
from kernel_harness.ops.pointwise_attention.cases import HstuCase
from kernel_harness.ops.pointwise_attention.reference import pointwise_outputs


def _loops(q, k, v, do, mask, scale):
    """out, dq, dk, dv by explicit loops over (batch, head, query, key)."""
    b_, lq, h_, _ = q.shape
    lk = k.shape[1]
    out, dq = np.zeros_like(q), np.zeros_like(q)
    dk, dv = np.zeros_like(k), np.zeros_like(v)
    for b in range(b_):
        for h in range(h_):
            for i in range(lq):
                for j in range(lk):
                    if not mask[b, i, j]:
                        continue
                    s = scale * float(np.dot(q[b, i, h], k[b, j, h]))
                    sig = 1.0 / (1.0 + math.exp(-s))
                    p = s * sig / lq
                    out[b, i, h] += p * v[b, j, h]
                    dv[b, j, h] += p * do[b, i, h]
                    ds = float(np.dot(do[b, i, h], v[b, j, h])) * sig * (1 + s * (1 - sig)) / lq
                    dq[b, i, h] += scale * ds * k[b, j, h]
                    dk[b, j, h] += scale * ds * q[b, i, h]
    return {"out": out, "dq": dq, "dk": dk, "dv": dv}


def test_dense_mask_causal_top_left_for_unequal_lengths():
    got = masks.dense_mask("causal", 3, 5)[0]
    want = np.array(
        [[1, 0, 0, 0, 0],
         [1, 1, 0, 0, 0],
         [1, 1, 1, 0, 0]], bool,
    )
    np.testing.assert_array_equal(got, want)
    got = masks.dense_mask("causal", 4, 2)[0]
    np.testing.assert_array_equal(got, np.array([[1, 0], [1, 1], [1, 1], [1, 1]], bool))


def test_dense_mask_window_is_inclusive_and_combines():
    got = masks.dense_mask("full", 4, 4, window=1)[0]
    want = np.array(
        [[1, 1, 0, 0],
         [1, 1, 1, 0],
         [0, 1, 1, 1],
         [0, 0, 1, 1]], bool,
    )
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(
        masks.dense_mask("causal", 3, 3, window=0)[0], np.eye(3, dtype=bool)
    )
    numpy_mask = np.array([[0, 1, 1], [1, 0, 1], [1, 1, 1]], bool)
    got = masks.dense_mask("numpy", 3, 3, window=1, numpy_mask=numpy_mask)[0]
    np.testing.assert_array_equal(got, np.array([[0, 1, 0], [1, 0, 1], [0, 1, 1]], bool))


def test_dense_mask_segments_per_batch_row():
    q_ids = np.array([[0, 0, 1], [2, 2, 2]])
    kv_ids = np.array([[1, 0], [2, 0]])
    got = masks.dense_mask(
        "full", 3, 2, q_segment_ids=q_ids, kv_segment_ids=kv_ids, batch=2
    )
    want = np.array(
        [[[0, 1], [0, 1], [1, 0]],
         [[1, 0], [1, 0], [1, 0]]], bool,
    )
    np.testing.assert_array_equal(got, want)


def test_attention_and_gradients_match_loops():
    rng = np.random.default_rng(0)
    q = rng.standard_normal((2, 3, 2, 4)).astype(np.float32)
    k = rng.standard_normal((2, 5, 2, 4)).astype(np.float32)
    v = rng.standard_normal((2, 5, 2, 4)).astype(np.float32)
    do = rng.standard_normal((2, 3, 2, 4)).astype(np.float32)
    mask = rng.random((2, 3, 5)) < 0.6
    mask[1, 2, :] = False  # a row that sees no key
    got = pointwise_outputs(dict(q=q, k=k, v=v, do=do), mask[:, None], 0.7)
    want = _loops(q, k, v, do, mask, 0.7)
    for name in want:
        np.testing.assert_allclose(np.asarray(got[name]), want[name], rtol=1e-5, atol=1e-6)
    assert np.all(np.asarray(got["out"])[1, 2] == 0.0)
    assert np.all(np.asarray(got["dq"])[1, 2] == 0.0)


def test_case_reference_matches_loops_with_segments_and_window():
    case = HstuCase(
        dtype="float32", seed=3, batch=2, q_heads=1, head_dim=8, q_len=128, kv_len=256,
        mask="causal", window=5, q_segments=((1, 60), (0, 1), (2, 67)),
        kv_segments=((0, 100), (1, 156)),
    )
    inputs = case.materialize()
    mask = np.zeros((2, 128, 256), bool)
    q_ids, kv_ids = inputs["q_segment_ids"], inputs["kv_segment_ids"]
    for b in range(2):
        for i in range(128):
            for j in range(256):
                mask[b, i, j] = j <= i and abs(i - j) <= 5 and q_ids[b, i] == kv_ids[b, j]
    want = _loops(inputs["q"], inputs["k"], inputs["v"], inputs["do"], mask, 1 / math.sqrt(8))
    got = reference(case, inputs)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-6)


def test_expand_runs_rotates_ids_per_batch_row():
    got = cases.expand_runs(((2, 1), (0, 2), (5, 1)), batch=2)
    np.testing.assert_array_equal(got, [[2, 0, 0, 5], [0, 5, 5, 2]])


def test_numpy_mask_patterns():
    def make(pattern, density):
        return cases.numpy_mask(HstuCase(
            dtype="float32", seed=0, q_len=256, kv_len=384, mask="numpy",
            mask_pattern=pattern, mask_density=density, mask_seed=7,
        ))

    assert make("random", 0.0).sum() == 0
    assert make("random", 1.0).all()
    rows = make("rows", 0.5)
    assert 0 < (~rows.any(axis=1)).sum() < 256  # some rows fully masked, not all
    tiles = make("tiles", 0.5).reshape(2, 128, 3, 128).mean(axis=(1, 3))
    assert set(np.unique(tiles)) - {0.0, 1.0}  # partial tiles...
    assert (tiles == 0).any()  # ...and empty ones
    np.testing.assert_array_equal(make("tiles", 0.5), make("tiles", 0.5))
