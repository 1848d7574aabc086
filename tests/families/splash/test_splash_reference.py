"""The splash reference against hand-written numpy: literal masks, explicit loops for
softmax attention with soft cap, sinks and grouped heads, and its gradients."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from kernel_harness.families.splash.cases import SplashCase
from kernel_harness.ops.attention.masks import dense_mask, parse_mask
from kernel_harness.ops.attention.reference import attend
from kernel_harness.records.registry import get_family

reference = get_family("splash").reference


def attention(q, k, v, sinks, allowed, *, soft_cap):
    """Splash's contract on the attention op, as the family's reference computes it
    (``record.definition`` of a splash case): q scaled, soft cap, sinks, denominator on
    the output."""
    return attend(q, k, v, allowed[None], 1.0, layout="bhqd", soft_cap=soft_cap, sinks=sinks,
                  normalize="output")


def _m(spec, shape):
    return dense_mask(parse_mask(spec), shape).astype(int)


@pytest.mark.parametrize("spec, shape, expected", [
    ("full", (2, 3), [[1, 1, 1], [1, 1, 1]]),
    ("causal(offset=0)", (3, 3), [[1, 0, 0], [1, 1, 0], [1, 1, 1]]),
    ("causal(offset=1)", (3, 4), [[1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]),
    ("causal(offset=-1)", (3, 3), [[0, 0, 0], [1, 0, 0], [1, 1, 0]]),
    ("local(left=1, right=0, offset=0)", (4, 4),
     [[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]]),
    ("local(left=0, right=1, offset=0)", (3, 4), [[1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]]),
    ("local(left=1, right=None, offset=1)", (3, 4), [[1, 1, 1, 1], [0, 1, 1, 1], [0, 0, 1, 1]]),
    ("local(left=None, right=0, offset=-1)", (3, 3), [[0, 0, 0], [1, 0, 0], [1, 1, 0]]),
    ("chunked(chunk=2)", (4, 4), [[1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 1, 1]]),
    ("chunked(chunk=3)", (4, 5),
     [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [0, 0, 0, 1, 0]]),
    ("causal(offset=0) & local(left=1, right=0, offset=0)", (3, 3),
     [[1, 0, 0], [1, 1, 0], [0, 1, 1]]),
    ("chunked(chunk=2) | local(left=0, right=1, offset=0)", (3, 3),
     [[1, 1, 0], [1, 1, 1], [0, 0, 1]]),
    ("numpy(causal(offset=0))", (2, 2), [[1, 0], [1, 1]]),
])
def test_dense_masks_are_the_literal_matrices(spec, shape, expected):
    np.testing.assert_array_equal(_m(spec, shape), np.array(expected))


def test_numpy_leaves_are_deterministic_and_boxes_cover_every_row():
    a = _m("random(seed=4, density=0.5)", (64, 96))
    np.testing.assert_array_equal(a, _m("random(seed=4, density=0.5)", (64, 96)))
    assert 0.35 < a.mean() < 0.65
    assert not np.array_equal(a, _m("random(seed=5, density=0.5)", (64, 96)))
    boxes = _m("boxes(seed=2, count=4)", (64, 96))
    assert boxes.any(axis=1).all()


def test_allowed_mask_ands_segments_per_head():
    runs = ((2, 2), (0, 3), (1, 1), (2, 122))  # ids 2 2 0 0 0 1 2 2 ...
    case = SplashCase(dtype="float32", seed=0, batch=1, q_heads=2, kv_heads=2, q_len=128,
                      kv_len=128, head_dim=128, masks=("full", "causal(offset=0)"),
                      q_segments=(runs,), kv_segments=(runs,))
    allowed = case.visible()[0]  # one segment layout for every batch row
    assert allowed.shape == (2, 128, 128)
    # head 0 (full): query 6 (id 2) sees keys 0, 1 and 6.. but nothing of ids 0 / 1.
    np.testing.assert_array_equal(np.flatnonzero(allowed[0, 6])[:3], [0, 1, 6])
    assert not allowed[0, 6, 2:6].any()
    # head 1 (causal): query 5 (the length-1 segment, id 1) sees only itself.
    np.testing.assert_array_equal(np.flatnonzero(allowed[1, 5]), [5])
    # head 1: query 2 (id 0) sees keys 2 only (key 3, 4 are in the future).
    np.testing.assert_array_equal(np.flatnonzero(allowed[1, 2]), [2])
    assert not case.rows_without_keys().any()


def _loop_attention(q, k, v, allowed, sinks, cap):
    """Explicit per-row softmax attention in float64."""
    b, hq, nq, _ = q.shape
    hkv = k.shape[1]
    out = np.zeros((b, hq, nq, v.shape[-1]))
    lse = np.full((b, hq, nq), -np.inf)
    for bi in range(b):
        for h in range(hq):
            kh = h // (hq // hkv)
            for i in range(nq):
                keys = [j for j in range(k.shape[2]) if allowed[h, i, j]]
                logits = [float(np.dot(q[bi, h, i], k[bi, kh, j])) for j in keys]
                if cap is not None:
                    logits = [cap * np.tanh(x / cap) for x in logits]
                terms = [np.exp(x) for x in logits]
                total = sum(terms) + (np.exp(sinks[h]) if sinks is not None else 0.0)
                if total == 0:
                    continue
                for t, j in zip(terms, keys, strict=True):
                    out[bi, h, i] += t / total * v[bi, kh, j]
                lse[bi, h, i] = np.log(total)
    return out, lse


@pytest.mark.parametrize("cap, with_sinks", [(None, False), (1.5, False), (None, True),
                                             (2.0, True)])
def test_attention_matches_explicit_loops(cap, with_sinks):
    rng = np.random.default_rng(0)
    q = rng.standard_normal((2, 4, 5, 3))
    k = rng.standard_normal((2, 2, 7, 3))  # grouped: query heads 0,1 -> kv 0; 2,3 -> kv 1
    v = rng.standard_normal((2, 2, 7, 2))
    allowed = rng.random((4, 5, 7)) < 0.6
    allowed[1, 3] = False  # a row that sees nothing
    sinks = rng.uniform(-1, 2, 4) if with_sinks else None
    out, lse = attention(*(jnp.asarray(x, jnp.float32) for x in (q, k, v)),
                         None if sinks is None else jnp.asarray(sinks, jnp.float32),
                         jnp.asarray(allowed), soft_cap=cap)
    want_out, want_lse = _loop_attention(q, k, v, allowed, sinks, cap)
    np.testing.assert_allclose(np.asarray(out), want_out, rtol=1e-5, atol=1e-5)
    if with_sinks:  # the empty row: only the sink, out 0 and lse = sink
        np.testing.assert_allclose(np.asarray(lse)[:, 1, 3], sinks[1], rtol=1e-6)
    else:
        assert np.isneginf(np.asarray(lse)[:, 1, 3]).all()
    np.testing.assert_allclose(np.asarray(lse), want_lse, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(out)[:, 1, 3], 0.0)


def test_reference_gradients_match_hand_formulas_and_finite_differences():
    rng = np.random.default_rng(1)
    q = rng.standard_normal((1, 2, 4, 3))
    k = rng.standard_normal((1, 1, 6, 3))
    v = rng.standard_normal((1, 1, 6, 3))
    do = rng.standard_normal((1, 2, 4, 3))
    sinks = np.array([0.3, -0.5])
    allowed = rng.random((2, 4, 6)) < 0.7
    allowed[:, :, 0] = True

    def f(q, k, v, s):
        return attention(q, k, v, s, jnp.asarray(allowed), soft_cap=None)[0]

    args = [jnp.asarray(x, jnp.float32) for x in (q, k, v, sinks)]
    out, vjp = jax.vjp(f, *args)
    dq, dk, dv, ds = (np.asarray(g, np.float64) for g in vjp(jnp.asarray(do, jnp.float32)))
    # By hand: p_ij = exp(s_ij - lse_i), dv_j = sum_{h,i} p_hij do_hi,
    # dsink_h = -sum_i exp(sink_h - lse_hi) <o_hi, do_hi>.
    _, lse = _loop_attention(q, k, v, allowed, sinks, None)
    o = np.asarray(out, np.float64)
    want_dv = np.zeros((6, 3))
    for h in range(2):
        for i in range(4):
            for j in range(6):
                if allowed[h, i, j]:
                    p = np.exp(np.dot(q[0, h, i], k[0, 0, j]) - lse[0, h, i])
                    want_dv[j] += p * do[0, h, i]
    np.testing.assert_allclose(dv[0, 0], want_dv, rtol=1e-5, atol=1e-5)
    want_ds = [-sum(np.exp(sinks[h] - lse[0, h, i]) * np.dot(o[0, h, i], do[0, h, i])
                    for i in range(4)) for h in range(2)]
    np.testing.assert_allclose(ds, want_ds, rtol=1e-5, atol=1e-6)

    # dq and dk: central differences of <out, do> in float64 through the loop reference.
    def loss(qq, kk):
        return float(np.sum(_loop_attention(qq, kk, v, allowed, sinks, None)[0] * do))

    eps = 1e-5
    for arr, grad, idx in ((q, dq, (0, 1, 2, 1)), (k, dk, (0, 0, 3, 2))):
        plus, minus = arr.copy(), arr.copy()
        plus[idx] += eps
        minus[idx] -= eps
        if arr is q:
            num = (loss(plus, k) - loss(minus, k)) / (2 * eps)
        else:
            num = (loss(q, plus) - loss(q, minus)) / (2 * eps)
        np.testing.assert_allclose(grad[idx], num, rtol=1e-3, atol=1e-5)


def test_reference_on_a_case_matches_loops():
    runs = ((3, 40), (0, 1), (1, 87))
    case = SplashCase(dtype="float32", seed=3, batch=1, q_heads=2, kv_heads=1, mqa=True,
                      q_len=128, kv_len=128, masks=("local(left=5, right=2, offset=0)",),
                      q_segments=(runs,), kv_segments=(runs,), soft_cap=2.0, sinks=True,
                      head_dim=64, head_dim_v=64)
    inputs = case.materialize()
    got = reference(case, inputs)
    want_out, want_lse = _loop_attention(
        inputs["q"].astype(np.float64), inputs["k"].astype(np.float64),
        inputs["v"].astype(np.float64), case.visible()[0], inputs["sinks"], 2.0)
    np.testing.assert_allclose(got["out"], want_out, rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(got["lse"], want_lse, rtol=2e-6)
    assert got["dsinks"].shape == (2,)
    assert got["dk"].shape == got["dv"].shape == (1, 1, 128, 64)
    no_sinks = reference(dataclasses.replace(case, sinks=False), inputs)
    assert no_sinks["dsinks"].shape == (0,)
