"""The GPU families' references against hand-computed numpy (explicit loops, float64)."""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest

from kernel_harness.families.gpu_decode.cases import DecodeCase
from kernel_harness.families.gpu_decode.family import FAMILY as DECODE_FAMILY
from kernel_harness.families.gpu_mha.cases import MhaCase
from kernel_harness.families.gpu_mha.family import FAMILY as MHA_FAMILY
from kernel_harness.families.gpu_paged.cases import PagedCase
from kernel_harness.families.gpu_paged.family import FAMILY as PAGED
from kernel_harness.ops.attention.program import AttentionCall, Definition, run_call

paged_reference = PAGED.reference


def attention(q, k, v, mask, scale):
    """gpu-mha's contract on the attention op: (out, lse in log base 2)."""
    call = AttentionCall(definition=Definition(layout="bqhd", scale=scale, lse="base2"),
                         q=q, k=k, v=v, vis=np.asarray(mask)[:, None])
    res = run_call(call, np.float32, jax.devices("cpu")[0])
    return res["out"], res["lse"]


def _softmax_rows(s):
    e = np.exp(s - s.max())
    return e / e.sum()


def test_attention_two_keys_by_hand():
    q = np.array([[[[1.0, 0.0]]]], np.float32)  # [batch, q_len, heads, dim]
    k = np.array([[[[1.0, 0.0]], [[0.0, 1.0]]]], np.float32)
    v = np.array([[[[1.0, 2.0]], [[3.0, 4.0]]]], np.float32)
    out, lse2 = attention(q, k, v, np.ones((1, 1, 2), bool), 1.0)
    p0 = math.e / (math.e + 1)  # logits are 1 and 0
    np.testing.assert_allclose(out[0, 0, 0], [p0 * 1 + (1 - p0) * 3, p0 * 2 + (1 - p0) * 4],
                               rtol=1e-6)
    np.testing.assert_allclose(lse2[0, 0, 0], math.log2(math.e + 1), rtol=1e-6)
    out, lse2 = attention(q, k, v, np.array([[[False, True]]]), 1.0)
    np.testing.assert_allclose(out[0, 0, 0], [3.0, 4.0], rtol=1e-6)
    np.testing.assert_allclose(lse2[0, 0, 0], 0.0, atol=1e-7)


def _mha_by_loops(case, x):
    q, k, v, do = (x[n].astype(np.float64) for n in ("q", "k", "v", "do"))
    ids = case.segment_arrays()
    seg = None if ids is None else ids[1]
    scale = case.effective_scale
    out, dq, dk, dv = np.zeros_like(q), np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    lse = np.zeros((case.batch, case.q_heads, case.q_len))
    for b in range(case.batch):
        for h in range(case.q_heads):
            for i in range(case.q_len):
                keys = [
                    j for j in range(case.kv_len)
                    if (not case.is_causal or j <= i) and (seg is None or seg[b, i] == seg[b, j])
                ]
                s = np.array([scale * q[b, i, h] @ k[b, j, h] for j in keys])
                p = _softmax_rows(s)
                out[b, i, h] = sum(pj * v[b, j, h] for pj, j in zip(p, keys, strict=True))
                lse[b, h, i] = (s.max() + np.log(np.exp(s - s.max()).sum())) / np.log(2)
                dp = np.array([do[b, i, h] @ v[b, j, h] for j in keys])
                ds = p * (dp - (p * dp).sum())
                for pj, dsj, j in zip(p, ds, keys, strict=True):
                    dv[b, j, h] += pj * do[b, i, h]
                    dq[b, i, h] += scale * dsj * k[b, j, h]
                    dk[b, j, h] += scale * dsj * q[b, i, h]
    return {"out": out, "lse": lse, "dq": dq, "dk": dk, "dv": dv}


@pytest.mark.parametrize(
    "fields",
    [
        dict(q_len=32, kv_len=32, is_causal=True,
             q_segments=(((2, 1), (0, 15), (2, 10), (1, 6)),),
             kv_segments=(((2, 1), (0, 15), (2, 10), (1, 6)),)),
        dict(q_len=32, kv_len=64, is_causal=True, scale=1.0, block_q_dq=16, block_kv_dkv=32),
        dict(q_len=64, kv_len=32, is_causal=False, block_q_dq=32, block_kv_dkv=16),
    ],
)
def test_mha_reference_matches_loops(fields):
    case = MhaCase(dtype="float32", seed=3, batch=1, q_heads=2, kv_heads=2, head_dim=16,
                   **fields)
    x = case.materialize()
    got = MHA_FAMILY.reference(case, x)
    want = _mha_by_loops(case, x)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=2e-5, atol=2e-5, err_msg=name)


def test_mha_dense_mask_by_hand():
    runs = (((5, 2), (3, 29), (5, 1)),)
    case = MhaCase(dtype="float32", seed=0, batch=1, q_heads=1, kv_heads=1, q_len=32, kv_len=32,
                   head_dim=16, is_causal=True, q_segments=runs, kv_segments=runs)
    mask = case.visible()[0, 0]
    assert mask[1, 0] and mask[1, 1] and not mask[0, 1]  # causal inside segment 5
    assert not mask[2, 1]  # segment 3 does not see segment 5
    assert mask[31, 0] and mask[31, 1] and not mask[31, 2]  # repeated id 5 sees the first run
    assert mask.sum() == 3 + 29 * 30 // 2 + 3  # rows 0,1 (3), segment 3 (triangle), row 31 (3)


def _decode_by_loops(case, x):
    q, k, v = (x[n].astype(np.float64) for n in ("q", "k", "v"))
    start, end = case.bounds()
    scale = case.effective_scale
    out = np.zeros_like(q)
    lse = np.full((case.batch, case.q_heads), -np.inf)
    for b in range(case.batch):
        for h in range(case.q_heads):
            g = h // case.group
            keys = list(range(max(start[b], 0), min(end[b], case.kv_len)))
            if not keys:
                continue
            s = np.array([scale * q[b, h] @ k[b, j, g] for j in keys])
            w = np.exp(s - s.max())
            lse[b, h] = s.max() + np.log(w.sum())
            if case.normalize_output:
                w = w / w.sum()
            out[b, h] = sum(wj * v[b, j, g] for wj, j in zip(w, keys, strict=True))
    return {"out": out, "lse": lse}


@pytest.mark.parametrize("normalize", [True, False])
def test_decode_reference_matches_loops(normalize):
    case = DecodeCase(dtype="float32", seed=5, batch=3, q_heads=6, kv_heads=2, q_len=1,
                      kv_len=64, head_dim=16, kv_starts=(0, 10, 40), kv_lengths=(64, 11, 40),
                      k_splits=2, normalize_output=normalize, sm_scale_arg=True)
    x = case.materialize()
    got, want = DECODE_FAMILY.reference(case, x), _decode_by_loops(case, x)
    np.testing.assert_allclose(got["out"], want["out"], rtol=2e-5, atol=2e-5)
    np.testing.assert_array_equal(got["out"][2], 0.0)  # start == end: no key, zeros
    assert np.all(got["lse"][2] == -np.inf)
    np.testing.assert_allclose(got["lse"][:2], want["lse"][:2], rtol=2e-6)
    # Row 1 sees exactly key 10.
    np.testing.assert_allclose(got["out"][1, 0], x["v"][1, 10, 0], rtol=1e-5)


def _paged_by_loops(case, x):
    q = x["q"].astype(np.float64)
    kp, vp = x["k_pages"].astype(np.float64), x["v_pages"].astype(np.float64)
    if case.quantized:
        kp = kp * x["k_scales_pages"][..., None]
        vp = vp * x["v_scales_pages"][..., None]
    tables = x["block_tables"]
    out = np.zeros_like(q)
    for b in range(case.batch):
        tokens = [(tables[b, t // case.page_size], t % case.page_size)
                  for t in range(case.length(b))]
        for h in range(case.q_heads):
            g = h // case.group
            if not tokens:
                continue
            s = np.array([q[b, h] @ kp[g, p, slot] for p, slot in tokens])
            if case.soft_cap is not None:
                s = case.soft_cap * np.tanh(s / case.soft_cap)
            w = _softmax_rows(s)
            out[b, h] = sum(wj * vp[g, p, slot] for wj, (p, slot) in zip(w, tokens, strict=True))
    return out


@pytest.mark.parametrize("quantized", [False, True])
@pytest.mark.parametrize("soft_cap", [None, 0.5])
def test_paged_reference_matches_loops(quantized, soft_cap):
    case = PagedCase(dtype="float32", seed=7, batch=3, q_heads=4, kv_heads=2, head_dim=16,
                     page_size=8, pages_per_seq=4, lengths=(17, 0, 32), shared_pages=0,
                     spare_pages=2, soft_cap=soft_cap, quantized=quantized,
                     pages_per_compute_block=2, k_splits=2)
    x = case.materialize()
    got = paged_reference(case, x)["out"]
    assert np.isfinite(got).all()  # NaN-poisoned pages never reach the reference
    np.testing.assert_allclose(got, _paged_by_loops(case, x), rtol=2e-5, atol=2e-5)
    np.testing.assert_array_equal(got[1], 0.0)  # length 0


def test_paged_reference_shared_prefix_pages():
    case = PagedCase(dtype="float32", seed=1, batch=2, q_heads=2, kv_heads=1, head_dim=16,
                     page_size=16, pages_per_seq=4, lengths=(40, 64), shared_pages=2)
    x = case.materialize()
    assert (x["block_tables"][0, :2] == x["block_tables"][1, :2]).all()
    np.testing.assert_allclose(paged_reference(case, x)["out"], _paged_by_loops(case, x),
                               rtol=2e-5, atol=2e-5)
