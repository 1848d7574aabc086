"""The SDPA reference against hand-computed numpy (explicit loops), and the strategy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from kernel_harness.families.sdpa.cases import SdpaCase
from kernel_harness.families.sdpa.family import FAMILY
from kernel_harness.ops.attention.problem import MASKING
from kernel_harness.ops.attention.strategy import effective_options

reference, valid = FAMILY.reference, FAMILY.valid


def loop_sdpa(case: SdpaCase, x: dict) -> dict:
    """Every output for a tiny case, one (batch, head, query row) at a time, float64."""
    b_, t_, n_, h_ = x["query"].shape
    s_, k_ = x["key"].shape[1], x["key"].shape[2]
    group = n_ // k_
    q, k, v, do = (x[n].astype(np.float64) for n in ("query", "key", "value", "do"))
    bias = x.get("bias")
    full_bias = (np.zeros((b_, n_, t_, s_)) if bias is None
                 else np.broadcast_to(bias.astype(np.float64), (b_, n_, t_, s_)))
    mask = x.get("mask")
    scale = case.scale if case.scale is not None else 1 / math.sqrt(h_)
    out, dq = np.zeros_like(q), np.zeros_like(q)
    dk, dv = np.zeros_like(k), np.zeros_like(v)
    dbias_full = np.zeros((b_, n_, t_, s_))
    for b in range(b_):
        for n in range(n_):
            kv = n // group
            for i in range(t_):
                if case.q_lengths is not None and i >= case.q_lengths[b]:
                    continue  # padding row: zero output, no gradient
                keys = []
                for j in range(s_):
                    ok = mask is None or np.broadcast_to(mask, (b_, n_, t_, s_))[b, n, i, j]
                    ok = ok and (not case.is_causal or j <= i)
                    if case.window is not None:
                        ok = ok and i - case.window[0] <= j <= i + case.window[1]
                    ok = ok and (case.kv_lengths is None or j < case.kv_lengths[b])
                    if ok:
                        keys.append(j)
                if not keys:
                    continue
                s = np.array([scale * q[b, i, n] @ k[b, j, kv] + full_bias[b, n, i, j]
                              for j in keys])
                p = np.exp(s - s.max())
                p /= p.sum()
                dp = np.array([do[b, i, n] @ v[b, j, kv] for j in keys])
                ds = p * (dp - (p * dp).sum())
                for pj, dsj, j in zip(p, ds, keys, strict=True):
                    out[b, i, n] += pj * v[b, j, kv]
                    dv[b, j, kv] += pj * do[b, i, n]
                    dq[b, i, n] += scale * dsj * k[b, j, kv]
                    dk[b, j, kv] += scale * dsj * q[b, i, n]
                    dbias_full[b, n, i, j] = dsj
    if bias is None:
        dbias = np.zeros((1, 1, 1, 1))
    else:  # the gradient of a broadcast bias sums over the broadcast axes
        axes = tuple(a for a in range(4) if bias.shape[a] == 1)
        dbias = dbias_full.sum(axis=axes, keepdims=True)
    return {"out": out, "dq": dq, "dk": dk, "dv": dv, "dbias": dbias}


def tiny(**kw) -> SdpaCase:
    base = dict(dtype="float32", seed=5, batch=2, q_len=6, kv_len=7, q_heads=4, kv_heads=2,
                head_dim=4)
    base.update(kw)
    return SdpaCase(**base)


CASES = {
    "plain-gqa": {},
    "mqa-causal": {"kv_heads": 1, "is_causal": True},
    "bias-full-scale": {"bias": "full", "scale": 0.3},
    "bias-head-shared": {"bias": "head-shared"},
    "bias-batch-shared-mask": {"bias": "batch-shared", "mask": "full", "mask_keep": 0.5},
    "window": {"window": (1, 2)},
    "window-causal": {"window": (2, 0), "is_causal": True},
    "lengths": {"q_lengths": (3, 6), "kv_lengths": (2, 7)},
    "everything": {"is_causal": True, "bias": "full", "mask": "head-shared",
                   "window": (3, 1), "q_lengths": (5, 0), "kv_lengths": (7, 4)},
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_reference_matches_loops(name):
    case = tiny(**CASES[name])
    x = case.materialize()
    got = reference(case, x)
    want = loop_sdpa(case, x)
    for out in want:
        np.testing.assert_allclose(got[out], want[out], rtol=1e-5, atol=1e-6, err_msg=out)


def test_padding_rows_are_zero_and_inside_the_contract():
    case = tiny(q_lengths=(2, 0))
    got = reference(case, case.materialize())
    assert not got["out"][0, 2:].any() and not got["out"][1].any()
    assert not got["dq"][0, 2:].any()
    assert valid(case) == {}  # padding rows are compared (to zero)


def test_rows_without_keys_are_excluded_and_silent():
    case = tiny(kv_lengths=(7, 1), is_causal=True, window=(0, 0), q_len=7)
    # batch 1: key 0 only; with a (0, 0) window row i sees key i, so rows 1.. see nothing
    outside = case.rows_outside()
    assert not outside[0].any() and outside[1, :, 1:].all() and not outside[1, :, 0].any()
    x = case.materialize()
    assert not x["do"][1, 1:].any()
    mask = valid(case)["out"]
    assert mask.shape == (2, 7, 4, 1) and not mask[1, 1:].any() and mask[0].all()


@pytest.mark.parametrize("bad", [
    {"q_heads": 3}, {"bias": "rows"}, {"window": (-1, 0)}, {"q_lengths": (1,)},
    {"kv_lengths": (8, 1)}, {"mask_keep": 0.0}, {"scale": -1.0},
])
def test_invalid_cases_are_clear_errors(bad):
    with pytest.raises(ValueError):
        tiny(**bad)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(FAMILY.cases())
def test_every_drawn_option_takes_effect(case):
    assert SdpaCase.from_json(case.to_json()) == case
    used = {o for o in MASKING if getattr(case, o) not in (None, False)}
    assert used <= set(effective_options(case))
    assert (case.visible().sum(-1) >= 2).any()
    x = case.materialize()
    assert x["query"].shape == (case.batch, case.q_len, case.q_heads, case.head_dim)
