"""The attention op's one dense-mask builder and one softmax (ops/attention/reference.py)
against loops written out by hand on tiny inputs: every option a kernel declares (offset,
window sides, chunks, segments, start/end bounds, soft cap, sinks, where the denominator
divides) and the numpy and jnp spellings of the mask agree."""

from __future__ import annotations

import itertools
import math

import jax.numpy as jnp
import numpy as np
import pytest

from kernel_harness.ops.attention.reference import NORMALIZE, attend, visibility


def _loop_mask(q_len, kv_len, *, causal=False, window=None, chunk=None, offset=0,
               seg=None, start=None, end=None, b=0):
    out = np.zeros((q_len, kv_len), bool)
    for i, j in itertools.product(range(q_len), range(kv_len)):
        pos = i + (offset[b] if isinstance(offset, list) else offset)
        ok = not causal or j <= pos
        if window is not None:
            left, right = window
            ok &= left is None or j >= pos - left
            ok &= right is None or j <= pos + right
        if chunk is not None:
            ok &= j // chunk == pos // chunk
        if seg is not None:
            ok &= seg[0][b][i] == seg[1][b][j]
        if start is not None:
            ok &= start[b] <= j
        if end is not None:
            ok &= j < end[b]
        out[i, j] = ok
    return out


@pytest.mark.parametrize("kw", [
    dict(causal=True), dict(causal=True, offset=2), dict(causal=True, offset=-1),
    dict(window=(1, 0)), dict(window=(None, 1)), dict(window=(2, None), offset=1),
    dict(causal=True, chunk=2), dict(causal=True, offset=[0, 3]),
])
@pytest.mark.parametrize("xp", [np, jnp], ids=["numpy", "jnp"])
def test_visibility_positions(kw, xp):
    q_len, kv_len = 3, 5
    args = dict(kw)
    offset = args.pop("offset", 0)
    vis = np.asarray(visibility(q_len, kv_len, q_offset=np.asarray(offset), xp=xp, **args))
    for b in range(vis.shape[0]):
        want = _loop_mask(q_len, kv_len, offset=offset, b=b, **args)
        np.testing.assert_array_equal(vis[b, 0], want, err_msg=str(kw))


def test_visibility_segments_bounds_and_lengths():
    seg_q = np.array([[0, 0, 1], [2, 2, 2]])
    seg_kv = np.array([[0, 1, 1, 1], [2, 0, 2, 2]])
    start, end = np.array([1, 0]), np.array([4, 2])
    vis = visibility(3, 4, segments=(seg_q, seg_kv), kv_starts=start, kv_lengths=end,
                     q_lengths=np.array([3, 1]), xp=np)
    for b in range(2):
        want = _loop_mask(3, 4, seg=(seg_q, seg_kv), start=start, end=end, b=b)
        if b == 1:
            want[1:] = False  # q_lengths: rows past the row's length see nothing
        np.testing.assert_array_equal(vis[b, 0], want)


def _loop_attention(q, k, v, vis, scale, soft_cap=None, sink=None):
    """q [hq, q, d], k/v [hkv, kv, d], vis [q, kv]: out [hq, q, d], natural lse [hq, q]."""
    hq, q_len, d = q.shape
    group = hq // k.shape[0]
    out = np.zeros((hq, q_len, d))
    lse = np.full((hq, q_len), -np.inf)
    for h, i in itertools.product(range(hq), range(q_len)):
        s = [float(q[h, i] @ k[h // group, j]) * scale for j in range(k.shape[1])]
        if soft_cap is not None:
            s = [soft_cap * math.tanh(x / soft_cap) for x in s]
        seen = [(x, j) for j, x in enumerate(s) if vis[i, j]]
        terms = [x for x, _ in seen] + ([sink[h]] if sink is not None else [])
        if not terms:
            continue
        m = max(terms)
        denom = sum(math.exp(x - m) for x in terms)
        lse[h, i] = m + math.log(denom)
        for x, j in seen:
            out[h, i] += math.exp(x - m) / denom * v[h // group, j]
    return out, lse


@pytest.mark.parametrize("normalize", ["probs", "output"])
@pytest.mark.parametrize("soft_cap,with_sinks", [(None, False), (2.0, False), (None, True)])
def test_attend_matches_the_loop_gqa_cap_sinks_and_an_empty_row(normalize, soft_cap,
                                                                  with_sinks):
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 4, 3, 2))  # bhqd: 4 query heads over 2 kv heads
    k, v = rng.standard_normal((2, 1, 2, 5, 2))
    vis = _loop_mask(3, 5, causal=True, offset=-1)  # row 0 sees no key
    sinks = rng.standard_normal(4) if with_sinks else None
    out, lse = attend(*(jnp.asarray(x, jnp.float32) for x in (q, k, v)),
                      jnp.asarray(vis)[None, None], 0.7, layout="bhqd", soft_cap=soft_cap,
                      sinks=None if sinks is None else jnp.asarray(sinks, jnp.float32),
                      normalize=normalize)
    want_out, want_lse = _loop_attention(q[0], k[0], v[0], vis, 0.7, soft_cap, sinks)
    np.testing.assert_allclose(np.asarray(out[0]), want_out, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(lse[0]), want_lse, rtol=1e-5, atol=1e-6)
    assert np.all(np.asarray(out[0, :, 0]) == 0)  # the empty row: exactly 0


def test_attend_unnormalized_and_the_other_layout():
    rng = np.random.default_rng(1)
    q = rng.standard_normal((1, 2, 2, 3))  # bqhd: 2 queries, 2 heads
    k, v = rng.standard_normal((2, 1, 4, 2, 3))  # 4 keys
    vis = _loop_mask(2, 4, causal=True, offset=2)
    args = [jnp.asarray(x, jnp.float32) for x in (q, k, v)]
    out, lse = attend(*args, jnp.asarray(vis)[None, None], 1.0, layout="bqhd",
                      normalize="none")
    normed, _ = attend(*args, jnp.asarray(vis)[None, None], 1.0, layout="bqhd")
    want_out, want_lse = _loop_attention(np.transpose(q[0], (1, 0, 2)),
                                         np.transpose(k[0], (1, 0, 2)),
                                         np.transpose(v[0], (1, 0, 2)), vis, 1.0)
    np.testing.assert_allclose(np.asarray(normed[0]), np.transpose(want_out, (1, 0, 2)),
                               rtol=1e-5, atol=1e-6)
    # unnormalized: out * exp(m - lse) is the normalized output, m the row's largest logit
    s = np.einsum("qhd,khd->hqk", q[0], k[0])
    m = np.max(np.where(vis[None], s, -np.inf), axis=-1)
    scale = np.exp(m - want_lse)
    np.testing.assert_allclose(np.asarray(out[0]) * np.transpose(scale)[..., None],
                               np.transpose(want_out, (1, 0, 2)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(lse[0]), want_lse, rtol=1e-5)


def test_attend_names_what_it_accepts():
    x = jnp.zeros((1, 1, 1, 1))
    with pytest.raises(ValueError, match=r"normalize must be one of \('probs'"):
        attend(x, x, x, jnp.ones((1, 1, 1, 1), bool), 1.0, layout="bhqd", normalize="later")
    assert NORMALIZE == ("probs", "output", "none")


def test_attend_with_no_key_at_all():
    q = jnp.ones((1, 2, 1, 2))
    k = v = jnp.ones((1, 0, 1, 2))
    out, lse = attend(q, k, v, jnp.ones((1, 1, 2, 0), bool), 1.0, layout="bqhd")
    assert out.shape == (1, 2, 1, 2) and not np.any(np.asarray(out))
    assert np.all(np.asarray(lse) == -np.inf)
