"""The delta-rule op's serving form (conv1d pre-stage, gates, slot pools): its reference
against a float64 loop written here from the definition, one token, one channel and one
head at a time; the case's validation; the strategy reaching the events it aims at."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from kernel_harness.ops.delta_rule.serving import (
    ServingCase,
    serving_cases,
    serving_events,
    serving_reference,
    untouched_slots,
)


def naive64(case: ServingCase, x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """out, conv_state and recurrent_state in float64, plain loops over sequences,
    tokens, channels and heads (no shared code with the op's reference)."""
    qkv = np.asarray(x["qkv"], np.float64)
    conv_pool = np.asarray(x["conv_state"], np.float64).copy()
    rec_pool = np.asarray(x["recurrent_state"], np.float64).copy()
    weight = np.asarray(x["conv_weight"], np.float64)
    bias = np.asarray(x["conv_bias"], np.float64) if case.conv_bias else np.zeros(case.dim)
    taps, hk, hv = case.kernel_size, case.key_heads, case.value_heads
    dk, dv = case.key_dim, case.value_dim
    out = np.zeros((case.tokens, hv * dv))
    row = 0
    new_conv, new_rec = {}, {}
    for s, n in enumerate(case.lengths):
        fresh = case.histories[s] == 0
        hist = (np.zeros((taps - 1, case.dim)) if fresh
                else np.asarray(x["conv_state"][case.read_slots[s]], np.float64))
        states = [np.zeros((dk, dv)) if fresh else
                  np.asarray(x["recurrent_state"][case.read_slots[s]][h], np.float64)
                  for h in range(hv)]
        window = [hist[i] for i in range(taps - 1)]
        for t in range(n):
            window.append(qkv[row + t])
            act = np.zeros(case.dim)
            for c in range(case.dim):
                pre = bias[c] + sum(weight[c, 0, j] * window[-taps + j][c] for j in range(taps))
                act[c] = pre / (1.0 + math.exp(-pre))
            for h in range(hv):
                kh = h // (hv // hk)
                q = act[kh * dk:(kh + 1) * dk]
                k = act[hk * dk + kh * dk:hk * dk + (kh + 1) * dk]
                v = act[2 * hk * dk + h * dv:2 * hk * dk + (h + 1) * dv]
                q = q / math.sqrt(q @ q + 1e-6) / math.sqrt(dk)
                k = k / math.sqrt(k @ k + 1e-6)
                if case.gate == "head":
                    a = float(x["a"][row + t, h]) + float(x["dt_bias"][h])
                    decay = np.full(dk, math.exp(-math.exp(float(x["a_log"][h]))
                                                 * math.log1p(math.exp(a))))
                else:  # one gate per key channel c of head h, at h * dk + c
                    decay = np.array([math.exp(-math.exp(float(x["a_log"][h])) * math.log1p(
                        math.exp(float(x["a"][row + t, h * dk + c])
                                 + float(x["dt_bias"][h * dk + c])))) for c in range(dk)])
                beta = 1.0 / (1.0 + math.exp(-float(x["b"][row + t, h])))
                st = states[h] * decay[:, None]
                st = st + np.outer(k, beta * v - beta * (st.T @ k))
                states[h] = st
                out[row + t, h * dv:(h + 1) * dv] = st.T @ q
        new_conv[case.write_slots[s]] = np.stack(window[-(taps - 1):])
        new_rec[case.write_slots[s]] = np.stack(states)
        row += n
    for slot, value in new_conv.items():
        conv_pool[slot] = value
    for slot, value in new_rec.items():
        rec_pool[slot] = value
    return {"out": out, "conv_state": conv_pool, "recurrent_state": rec_pool}


SMALL = dict(dtype="bfloat16", tokens=24, max_seqs=4, slots=7, key_dim=8, value_dim=8,
             chunk_size=8)


@pytest.mark.parametrize("case", [
    ServingCase(seed=1, **SMALL, lengths=(1, 11, 2), histories=(4, 0, 3), num_decode=1,
                write_slots=(2, 5, 1), read_slots=(4, 5, 1)),
    ServingCase(seed=2, **SMALL, key_heads=1, value_heads=2, kernel_size=3, conv_bias=False,
                lengths=(1, 1, 9, 10), histories=(1, 7, 2, 0), num_decode=2,
                write_slots=(6, 3, 2, 1), read_slots=(6, 4, 2, 5), decay="weak"),
    ServingCase(seed=3, **SMALL, value_heads=2, gate="channel", lengths=(1, 12, 3),
                histories=(2, 0, 4), num_decode=1, write_slots=(1, 2, 3),
                read_slots=(5, 2, 3), decay="weak"),
], ids=["gdn", "grouped-k3-weak", "kda-per-channel"])
def test_reference_matches_a_float64_loop(case: ServingCase) -> None:
    x = case.materialize()
    ref, loop = serving_reference(case, x), naive64(case, x)
    for name in ("out", "conv_state", "recurrent_state"):
        scale = np.abs(loop[name]).max()
        assert np.abs(ref[name] - loop[name]).max() <= 2e-6 * scale, name
    # The slots nobody writes stay as they were, bit for bit; rows past the end are zero.
    for slot in untouched_slots(case):
        assert np.array_equal(ref["recurrent_state"][slot], x["recurrent_state"][slot])
        assert np.array_equal(ref["conv_state"][slot], x["conv_state"][slot])
    assert not ref["out"][sum(case.lengths):].any()


def test_metadata_is_the_call_s() -> None:
    case = ServingCase(seed=0, **SMALL, lengths=(1, 5), histories=(3, 0), num_decode=1,
                       write_slots=(2, 3), read_slots=(1, 3))
    x = case.materialize()
    assert x["query_start_loc"].tolist() == [0, 1, 6, 6, 6]
    assert x["seq_lens"].tolist() == [4, 5, 0, 0]
    assert x["state_indices"].tolist() == [2, 3, 0, 0]
    assert x["read_state_indices"].tolist() == [1, 3, 0, 0]
    assert x["distribution"].tolist() == [1, 2, 2]
    assert x["qkv"].shape == (24, case.dim)


@pytest.mark.parametrize(("change", "message"), [
    (dict(write_slots=(2, 2)), "distinct"),
    (dict(read_slots=(3, 3)), "another writes"),
    (dict(write_slots=(0, 3)), "null slot"),
    (dict(num_decode=2), "num_decode"),
    (dict(lengths=(1, 30)), "tokens="),
    (dict(gate="row"), "gate must be"),
])
def test_invalid_cases_are_refused(change: dict, message: str) -> None:
    base = ServingCase(seed=0, **SMALL, lengths=(1, 5), histories=(3, 0), num_decode=1,
                       write_slots=(2, 3), read_slots=(2, 3))
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(base, **change)


@settings(max_examples=60, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(serving_cases())
def test_strategy_reaches_its_events(case: ServingCase) -> None:
    assert sum(case.lengths) <= case.tokens
    _seen.update(serving_events(case))


_seen: set[str] = set()


def test_events_reached() -> None:
    test_strategy_reaches_its_events()
    wanted = {"decode-row", "prefill-row", "continued-prefill", "decode-beside-prefill",
              "multi-chunk-sequence", "partial-last-chunk", "shorter-than-conv-state",
              "misaligned-start", "read-slot-differs", "unused-slots", "padding-rows",
              "padding-seqs", "grouped-heads", "conv-bias", "decay:weak", "gate:head"}
    assert wanted <= _seen, wanted - _seen


def test_a_per_channel_gate_comes_per_key_channel_in_qkv_s_dtype():
    case = ServingCase(seed=0, **SMALL, value_heads=2, gate="channel", lengths=(3,),
                       histories=(0,), write_slots=(1,), read_slots=(1,))
    x = case.materialize()
    assert x["a"].shape == (24, 2 * 8) and x["a"].dtype == x["qkv"].dtype
    assert x["dt_bias"].shape == (16,)
    assert "gate:channel" in serving_events(case)
