"""The flash reference against hand-computed numpy (explicit loops), and the case
strategy's validity."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from kernel_harness.families.flash.cases import FlashCase
from kernel_harness.families.flash.family import FAMILY


def loop_attention(q, k, v, ab, vis, scale, do):
    """Attention and its gradients for one (batch, head), one row at a time."""
    tq, d = q.shape
    out, dq = np.zeros_like(q), np.zeros_like(q)
    dk, dv, dab = np.zeros_like(k), np.zeros_like(v), np.zeros((tq, k.shape[0]))
    for i in range(tq):
        keys = [j for j in range(k.shape[0]) if vis[i, j]]
        if not keys:
            continue
        s = np.array([(q[i] @ k[j] + ab[i, j]) * scale for j in keys])
        p = np.exp(s - s.max())
        p /= p.sum()
        out[i] = sum(pj * v[j] for pj, j in zip(p, keys, strict=True))
        dp = np.array([do[i] @ v[j] for j in keys])
        ds = p * (dp - (p * dp).sum())
        for pj, dsj, j in zip(p, ds, keys, strict=True):
            dv[j] += pj * do[i]
            dq[i] += scale * dsj * k[j]
            dk[j] += scale * dsj * q[i]
            dab[i, j] = scale * dsj
    return out, dq, dk, dv, dab


def small_case(**kw) -> FlashCase:
    base = dict(
        dtype="float32", seed=3, batch=2, q_heads=2, kv_heads=2, q_len=128, kv_len=256,
        head_dim=8, is_causal=True, scale=0.3, bias="full",
        q_segments=(((1, 5), (0, 123)), ((2, 128),)),
        kv_segments=(((0, 3), (1, 253)), ((2, 1), (5, 255))),
        block_b=1, block_q=128, block_k_major=256, block_k=256, block_q_major_dkv=128,
        block_k_major_dkv=256, block_k_dkv=256, block_q_dkv=128, block_k_major_dq=256,
        block_k_dq=256, block_q_dq=128,
    )
    base.update(kw)
    return FlashCase(**base)


@pytest.mark.parametrize("kw", [{}, {"is_causal": False}, {"bias": None, "scale": 1.0},
                                {"q_segments": None, "kv_segments": None}])
def test_reference_matches_loops(kw):
    case = small_case(**kw)
    x = case.materialize()
    got = FAMILY.reference(case, x)
    vis = case.visible()[:, 0]
    ab = x.get("ab", np.zeros((case.batch, case.q_heads, case.q_len, case.kv_len)))
    for b in range(case.batch):
        for h in range(case.q_heads):
            want = loop_attention(
                *(x[n][b, h].astype(np.float64) for n in ("q", "k", "v")),
                ab[b, h].astype(np.float64), vis[b], case.scale,
                x["do"][b, h].astype(np.float64),
            )
            for name, w in zip(("out", "dq", "dk", "dv", "dab"), want, strict=True):
                if name == "dab" and not case.bias:
                    w = np.zeros_like(w)
                np.testing.assert_allclose(got[name][b, h], w, rtol=2e-5, atol=2e-5,
                                           err_msg=f"{name} b={b} h={h}")


def test_bias_enters_before_scaling_in_reference():
    case = small_case(q_segments=None, kv_segments=None, is_causal=False, scale=0.25)
    x = case.materialize()
    got = FAMILY.reference(case, x)["out"][0, 0, 0]
    q, k, v, ab = (x[n][0, 0].astype(np.float64) for n in ("q", "k", "v", "ab"))
    s = (q[0] @ k.T + ab[0]) * 0.25
    p = np.exp(s - s.max())
    np.testing.assert_allclose(got, (p / p.sum()) @ v, rtol=1e-5, atol=1e-6)


def test_rows_without_keys_are_excluded_and_silent():
    case = small_case()  # batch 0 rows 0..4 have id 1; kv id 1 starts at 3, causal
    rows = case.rows_without_keys()[:, 0]
    assert rows[0, :3].all() and not rows[0, 3:].any() and not rows[1].any()
    x = case.materialize()
    assert not x["do"][0, :, :3].any() and x["do"][0, :, 3:].any()
    mask = FAMILY.valid(case)["out"]
    assert mask.shape == (2, 2, 128, 1) and not mask[0, :, :3].any() and mask[0, :, 3:].all()


@pytest.mark.parametrize("bad", [
    {"block_k": 64, "block_k_major": 128},          # kv blocks must be multiples of 128
    {"block_k_major": 96},                          # must divide kv_len
    {"block_q_dkv": 96},                            # must divide block_q_major_dkv
    {"block_b": 3},                                 # > batch
    {"head_dim": 192},                              # > 128 and not a multiple of 128
    {"q_segments": None},                           # both or neither
    {"kv_segments": (((0, 256),),)},                # one row per batch element
    {"scale": 0.0},
    {"kv_heads": 1},                                # no grouped-query attention
    {"bias": "head-shared"},                        # ab is full
])
def test_invalid_cases_are_clear_errors(bad):
    with pytest.raises(ValueError):
        small_case(**bad)


# Nightly: a fact of flash's strategy (nightly with the other families' draws).
@pytest.mark.nightly
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(FAMILY.cases())
def test_every_drawn_case_is_valid_and_roundtrips(case):
    assert FlashCase.from_json(case.to_json()) == case
    json.loads(case.to_json())
    seen = case.visible().sum(-1)
    assert 4 * (seen >= 2).sum() >= (seen >= 1).sum()
    assert case.q_len // case.block_q_dq <= 4 and case.kv_len // case.block_k_major_dq <= 4
    x = case.materialize()
    assert x["q"].shape == (case.batch, case.q_heads, case.q_len, case.head_dim)
    assert x["q"].dtype == np.dtype(case.dtype) or case.dtype == "bfloat16"
    assert ("ab" in x) == (case.bias is not None)
    assert ("segment_ids_q" in x) == (case.q_segments is not None)
    assert case.kv_len % 128 == 0 and case.q_len % 32 == 0 and case.q_heads == case.kv_heads
    assert all(math.isfinite(float(np.abs(a).max())) for a in x.values())
    assert set(FAMILY.events(case)) >= {case.dtype}
