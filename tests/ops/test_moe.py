"""ops/moe: the MoE op's vocabulary, data and reference, against values computed by hand
(one token, one expert at a time), independent of any kernel and of tpu-inference."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings

from kernel_harness.ops.moe.cases import GATING_STEP, MoeCase, moe_cases, moe_events
from kernel_harness.ops.moe.reference import reference, routing

BASE = dict(dtype="float32", seed=3, devices=2, tokens_per_device=8, hidden=256,
            intermediate=128, experts_per_device=2, top_k=2, bt=8, bt_compute=8, bf=128,
            bf_compute=128, bd=256, bd_compute=128)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _expert(inputs, e, x, case):
    """One expert's FFN of one token, written out for the case's activation."""
    g = x @ inputs["w1"][e, 0].astype(np.float64)
    u = x @ inputs["w1"][e, 1].astype(np.float64)
    if case.bias:
        g, u = g + inputs["b1"][e, 0, 0], u + inputs["b1"][e, 1, 0]
    if case.activation == "silu":
        a = g * _sigmoid(g) * u
    elif case.activation == "gelu":
        a = 0.5 * g * (1 + np.tanh(0.7978845608028654 * (g + 0.044715 * g**3))) * u
    else:
        g, u = np.minimum(g, 7.0), np.clip(u, -7.0, 7.0)
        a = (u + 1) * g * _sigmoid(1.702 * g)
    y = a @ inputs["w2"][e].astype(np.float64)
    return y + inputs["b2"][e, 0] if case.bias else y


@pytest.mark.parametrize("kw", [
    {}, {"scoring": "sigmoid", "renormalize": True}, {"activation": "gelu", "bias": True},
    {"activation": "swigluoai", "top_k": 1}, {"top_k": 4, "renormalize": True}])
def test_each_token_is_the_weighted_sum_of_its_top_experts(kw):
    case = MoeCase(**{**BASE, **kw})
    inputs = case.materialize()
    out = reference(case, inputs)["out"]
    for t in (0, 5, case.tokens - 1):
        logits = inputs["gating"][t].astype(np.float64)
        s = (np.exp(logits) / np.exp(logits).sum() if case.scoring == "softmax"
             else _sigmoid(logits))
        top = np.argsort(s)[::-1][:case.top_k]
        w = s[top] / (s[top].sum() if case.renormalize else 1)
        x = inputs["tokens"][t].astype(np.float64)
        expected = sum(wi * _expert(inputs, e, x, case) for wi, e in zip(w, top, strict=True))
        np.testing.assert_allclose(out[t], expected, rtol=1e-5, atol=1e-5)


def test_gating_logits_are_distinct_steps_so_routing_has_no_ties():
    case = MoeCase(**{**BASE, "dtype": "bfloat16", "bd": 256, "bd_compute": 256,
                      "tokens_per_device": 16, "bt": 16, "bt_compute": 16})
    gating = np.asarray(case.materialize()["gating"], np.float64)
    for row in gating:
        assert sorted(np.round(np.diff(np.sort(row)) / GATING_STEP).tolist()) == [1] * 3
    chosen, weights = routing(case, gating)
    assert (np.diff(weights, axis=1) < 0).all()  # strictly decreasing: no ties
    assert chosen.shape == (case.tokens, 2)


def test_one_expert_per_token_with_top_1_and_a_renormalized_weight_of_one():
    case = MoeCase(**{**BASE, "top_k": 1, "renormalize": True})
    inputs = case.materialize()
    out = reference(case, inputs)["out"]
    e = int(np.argmax(inputs["gating"][2]))
    np.testing.assert_allclose(out[2], _expert(inputs, e, inputs["tokens"][2].astype(
        np.float64), case), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("kw", "match"), [
    ({"top_k": 5}, "top_k must be in 1..experts"),
    ({"scoring": "relu"}, "scoring must be one of"),
    ({"activation": "tanh"}, "activation must be one of"),
    ({"bt": 16}, "bt_compute .* must divide bt"),
    ({"bf_compute": 64, "bf": 128}, "multiples of 128"),
    ({"dtype": "bfloat16", "tokens_per_device": 16, "bt": 16, "bt_compute": 16},
     "bd_compute .* multiples of 256"),
    ({"devices": 1}, "devices must be 2 or more"),
])
def test_bad_cases_say_what_is_wrong(kw, match):
    with pytest.raises(ValueError, match=match):
        MoeCase(**{**BASE, **kw})


@settings(max_examples=40, deadline=None, database=None)
@given(moe_cases(max_devices=4))
def test_the_strategy_draws_valid_cases_whose_events_name_their_blocks(case):
    assert dataclasses.replace(case) == case
    ev = moe_events(case)
    assert ("multi-token-block" in ev) == (case.tokens_per_device > case.bt)
    assert ("hidden-compute<block" in ev) == (case.bd > case.bd_compute)
    assert case.materialize()["gating"].shape == (case.tokens, case.experts)
