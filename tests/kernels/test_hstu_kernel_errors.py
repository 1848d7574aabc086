"""Bad input to ``hstu_attention`` is a clear ValueError, raised before any kernel runs."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from kernel_harness import hstu_attention

B, LQ, LK, H, D = 2, 256, 384, 2, 32


def _qkv(q_len=LQ, kv_len=LK, heads=H, dim=D, dtype=jnp.float32):
    q = jnp.zeros((B, q_len, heads, dim), dtype)
    k = jnp.zeros((B, kv_len, heads, dim), dtype)
    return q, k, k


def _seg(length):
    return jnp.zeros((B, length), jnp.int32)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mask_type": np.ones((LQ, LQ), bool)}, r"mask shape \(256, 256\) does not match"),
        ({"mask_type": np.ones((LQ, LK), np.int32)}, "numpy mask must have dtype bool"),
        ({"mask_type": "causl"}, "mask_type must be 'causal', 'full' or a numpy bool array"),
        ({"mask_type": None}, "mask_type must be 'causal', 'full' or a numpy bool array"),
        ({"mask_type": jnp.ones((LQ, LK), bool)}, "not a jax Array"),
        ({"q_segment_ids": _seg(LQ)}, "pass both q_segment_ids and kv_segment_ids, or neither"),
        ({"kv_segment_ids": _seg(LK)}, "pass both q_segment_ids and kv_segment_ids, or neither"),
        (
            {"q_segment_ids": _seg(LK), "kv_segment_ids": _seg(LK)},
            r"q_segment_ids must have shape \(2, 256\)",
        ),
        (
            {"q_segment_ids": _seg(LQ), "kv_segment_ids": _seg(LQ)},
            r"kv_segment_ids must have shape \(2, 384\)",
        ),
        (
            {"q_segment_ids": jnp.zeros((B, LQ)), "kv_segment_ids": _seg(LK)},
            "q_segment_ids must be integers",
        ),
        ({"sliding_window_size": -1}, "sliding_window_size must be >= 0, got -1"),
        ({"sliding_window_size": 2.5}, "sliding_window_size must be an int or None"),
        ({"sliding_window_size": True}, "sliding_window_size must be an int or None"),
        ({"scale": float("inf")}, "scale must be finite"),
        ({"block_q": 64}, "block_q=64 breaks the 128-lane rule"),
        ({"block_q": 384}, "block_q=384 does not divide q_len=256"),
        ({"block_kv": 256}, "block_kv=256 does not divide kv_len=384"),
        ({"block_kv": 384, "block_kv_compute": 256}, "block_kv_compute=256 does not divide"),
        ({"block_kv_compute": 200}, "block_kv_compute=200 breaks the 128-lane rule"),
        ({"block_q_dkv": 100}, "block_q_dkv=100 breaks the 128-lane rule"),
        ({"block_q_dkv": 512}, "block_q_dkv=512 does not divide q_len=256"),
        ({"block_kv_dkv": 256}, "block_kv_dkv=256 does not divide kv_len=384"),
        (
            {"block_kv_dkv": 128, "block_kv_dkv_compute": 256},
            "block_kv_dkv_compute=256 does not divide block_kv_dkv=128",
        ),
        ({"block_kv": 0}, "block_kv must be a positive int, got 0"),
    ],
)
def test_bad_arguments(kwargs, message):
    q, k, v = _qkv()
    kwargs = {"mask_type": "causal", **kwargs}
    mask_type = kwargs.pop("mask_type")
    with pytest.raises(ValueError, match=message):
        hstu_attention(mask_type, q, k, v, interpret=True, **kwargs)


def test_wrong_rank():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match=r"rank 4 \[batch, length, heads, head_dim\]"):
        hstu_attention("causal", q[0], k, v, interpret=True)


def test_head_mismatch():
    q, _, _ = _qkv()
    _, k, v = _qkv(heads=1)
    with pytest.raises(ValueError, match="head mismatch: q has 2 heads, k/v have 1"):
        hstu_attention("causal", q, k, v, interpret=True)


def test_head_dim_batch_and_kv_shape_mismatch():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="head_dim mismatch"):
        hstu_attention("full", q, k[..., :16], v[..., :16], interpret=True)
    with pytest.raises(ValueError, match="batch mismatch"):
        hstu_attention("full", q[:1], k, v, interpret=True)
    with pytest.raises(ValueError, match="k and v shapes differ"):
        hstu_attention("full", q, k, v[:, :256], interpret=True)


def test_dtype_mismatch():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="share one floating dtype"):
        hstu_attention("full", q, k.astype(jnp.bfloat16), v, interpret=True)


def test_short_sequence_default_block_names_the_rule():
    q, k, v = _qkv(q_len=64, kv_len=64)
    with pytest.raises(ValueError, match="block_q=64 breaks the 128-lane rule"):
        hstu_attention("causal", q, k, v, interpret=True)
