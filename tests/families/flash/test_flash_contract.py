"""The flash kernel's own semantic choices, as written in the family contract, checked
on the kernel itself (forward, interpret backend)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental.pallas.ops.tpu import flash_attention as fa

from kernel_harness import resolve_backend
from kernel_harness.families.flash.family import FAMILY

BACKEND = resolve_backend("interpret")
RNG = np.random.default_rng(0)


def _blocks(q_len: int, kv_len: int, block_k: int) -> fa.BlockSizes:
    return fa.BlockSizes(
        block_q=q_len, block_k_major=block_k, block_k=block_k, block_b=1,
        block_q_major_dkv=q_len, block_k_major_dkv=kv_len, block_k_dkv=kv_len,
        block_q_dkv=q_len, block_k_major_dq=kv_len, block_k_dq=kv_len, block_q_dq=q_len,
    )


def _kernel(q, k, v, ab=None, seg=None, *, causal=False, sm_scale=1.0, block_k=None):
    blocks = _blocks(q.shape[2], k.shape[2], block_k or k.shape[2])
    with BACKEND.forcing_interpret():
        out = jax.jit(lambda q, k, v, ab: fa.flash_attention(
            q, k, v, ab, seg, causal=causal, sm_scale=sm_scale, block_sizes=blocks))(q, k, v, ab)
        return np.asarray(out, np.float64)


def _softmax_rows(s):
    p = np.exp(s - s.max(-1, keepdims=True))
    return p / p.sum(-1, keepdims=True)


def _qkv(q_len=128, kv_len=256, d=32):
    q, k, v = (jnp.asarray(RNG.standard_normal((1, 1, n, d)), jnp.float32)
               for n in (q_len, kv_len, kv_len))
    return q, k, v


def test_bias_is_added_before_sm_scale():
    q, k, v = _qkv()
    ab = jnp.asarray(4 * RNG.standard_normal((1, 1, 128, 256)), jnp.float32)
    out = _kernel(q, k, v, ab, sm_scale=0.25)
    qk = np.einsum("qd,kd->qk", q[0, 0], k[0, 0])
    before = _softmax_rows((qk + ab[0, 0]) * 0.25) @ np.asarray(v[0, 0])
    after = _softmax_rows(qk * 0.25 + ab[0, 0]) @ np.asarray(v[0, 0])
    np.testing.assert_allclose(out[0, 0], before, atol=1e-4)
    assert np.abs(out[0, 0] - after).max() > 0.1  # the usual convention differs
    assert "BEFORE scaling" in FAMILY.contract


@pytest.mark.parametrize("block_k", [256, 128])  # single-tile and tiled forward
def test_row_without_keys_returns_mean_of_v(block_k):
    q, k, v = _qkv()
    seg_q = np.zeros((1, 128), np.int32)
    seg_q[0, 5] = 7  # id 7 appears in no key
    seg = fa.SegmentIds(q=jnp.asarray(seg_q), kv=jnp.zeros((1, 256), jnp.int32))
    out = _kernel(q, k, v, seg=seg, block_k=block_k)
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out[0, 0, 5], np.asarray(v[0, 0]).mean(0), atol=1e-5)
    assert "OUTSIDE the contract" in FAMILY.contract


def test_causal_is_top_left_aligned_when_q_is_shorter():
    q, k, v = _qkv(q_len=128, kv_len=256)
    out = _kernel(q, k, v, causal=True, block_k=128)
    qk = np.einsum("qd,kd->qk", q[0, 0], k[0, 0])
    rows, cols = np.arange(128)[:, None], np.arange(256)[None, :]
    top_left = np.where(cols <= rows, qk, -np.inf)
    bottom_right = np.where(cols <= rows + 128, qk, -np.inf)
    np.testing.assert_allclose(out[0, 0], _softmax_rows(top_left) @ np.asarray(v[0, 0]),
                               atol=1e-4)
    np.testing.assert_allclose(out[0, 0, 0], np.asarray(v[0, 0, 0]), atol=1e-5)  # sees key 0
    assert np.abs(out[0, 0] - _softmax_rows(bottom_right) @ np.asarray(v[0, 0])).max() > 0.1
    assert "top-left" in FAMILY.contract
