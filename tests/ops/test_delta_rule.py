"""The delta-rule op: its reference against a float64 numpy loop written here from the
definition (forward) and against central finite differences of that loop (gradients); the
case's validation; the strategy reaching the hard paths it aims at."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from kernel_harness.ops.delta_rule.cases import DeltaRuleCase
from kernel_harness.ops.delta_rule.reference import reference
from kernel_harness.ops.delta_rule.strategy import (
    chunk_variants,
    delta_rule_cases,
    delta_rule_events,
)

_DIFF = ("q", "k", "v", "g", "b", "w", "h0")


def serial64(case: DeltaRuleCase, x: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(out, final_state) in float64, one token and one head at a time, plain loops."""
    q, k, v, g, b, w = (np.asarray(x[n], np.float64) for n in _DIFF[:6])
    h0 = np.asarray(x["h0"], np.float64) if "h0" in x else np.zeros(
        (case.batch, case.value_heads, case.key_dim, case.value_dim))
    group = case.value_heads // case.key_heads
    ids = case.segment_ids()
    out = np.zeros((case.batch, case.seq_len, case.value_heads, case.value_dim))
    final = np.zeros_like(h0)
    for bi in range(case.batch):
        for h in range(case.value_heads):
            kh = h // group
            s = h0[bi, h].copy()
            for t in range(case.seq_len):
                if t and ids[bi, t] != ids[bi, t - 1]:
                    s = np.zeros_like(s)
                qt, kt = q[bi, t, kh], k[bi, t, kh]
                if case.qk_l2norm:
                    qt = qt / np.sqrt(qt @ qt + 1e-6)
                    kt = kt / np.sqrt(kt @ kt + 1e-6)
                qt = qt / np.sqrt(case.key_dim)
                s = np.exp(g[bi, t, kh])[:, None] * s
                err = w[bi, t, h] * v[bi, t, h] - s.T @ (b[bi, t, kh] * kt)
                s = s + np.outer(kt, err)
                out[bi, t, h] = s.T @ qt
            final[bi, h] = s
    return out, final


CASES = [
    DeltaRuleCase(dtype="float32", seed=1, batch=2, seq_len=37, key_heads=1, value_heads=2,
                  key_dim=8, value_dim=4, chunk_size=16, documents=((10, 1, 26), (37,)),
                  initial_state=True, qk_l2norm=True, decay="burst", burst_strength=5.0),
    DeltaRuleCase(dtype="float32", seed=2, batch=1, seq_len=32, key_heads=2, value_heads=2,
                  key_dim=4, value_dim=8, chunk_size=16, qk_l2norm=False, decay="weak",
                  zero_chunk=1),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.shape_summary())
def test_reference_matches_float64_loop(case: DeltaRuleCase) -> None:
    x = case.materialize()
    got = reference(case, x)
    out, final = serial64(case, x)
    for name, want in (("out", out), ("final_state", final)):
        err = np.abs(got[name] - want).max() / np.abs(want).max()
        assert err < 2e-6, (name, err)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.shape_summary())
def test_reference_gradients_match_finite_differences(case: DeltaRuleCase) -> None:
    """<d name, direction> against the central difference of the float64 loop's
    <dout, out> + <dstate, final_state> along a random direction, per input."""
    x = case.materialize()
    got = reference(case, x)
    x64 = {n: np.asarray(a, np.float64) for n, a in x.items()}
    rng = np.random.default_rng(0)

    def objective(arrays):
        out, final = serial64(case, arrays)
        return (out * x64["dout"]).sum() + (final * x64["dstate"]).sum()

    for name in [n for n in _DIFF if n in x]:
        d = rng.standard_normal(x64[name].shape)
        eps = 1e-6
        plus = objective({**x64, name: x64[name] + eps * d})
        minus = objective({**x64, name: x64[name] - eps * d})
        fd = (plus - minus) / (2 * eps)
        analytic = float((got[f"d{name}"].astype(np.float64) * d).sum())
        scale = float(np.abs(got[f"d{name}"]).sum() * np.abs(d).max()) or 1.0
        assert abs(analytic - fd) <= 1e-5 * scale, (name, analytic, fd)


def test_documents_reset_and_initial_state_applies_to_first_document_only() -> None:
    """A row of two documents gives, for the second, what that document alone gives
    without the initial state: the reset is complete."""
    case = CASES[0]
    x = case.materialize()
    got = reference(case, x)
    alone = dataclasses.replace(case, batch=1, seq_len=26, documents=(),
                                initial_state=False)
    sub = {n: a[:1, 11:] for n, a in x.items() if n in ("q", "k", "v", "g", "b", "w", "dout")}
    sub["dstate"] = x["dstate"][:1]
    want = reference(alone, sub)
    np.testing.assert_allclose(got["out"][:1, 11:], want["out"], rtol=0, atol=1e-6)


@pytest.mark.parametrize(("fields", "needle"), [
    ({"value_heads": 3, "key_heads": 2}, "value_heads"),
    ({"documents": ((10, 10),)}, "documents"),
    ({"documents": ((37,), (30, 7), (37,))}, "documents"),
    ({"decay": "strong"}, "decay"),
    ({"zero_chunk": 5}, "zero_chunk"),
    ({"burst_strength": 0.0}, "burst_strength"),
    ({"keys": "orthogonal"}, "keys"),
    ({"chunk_size": 0}, "chunk_size"),
])
def test_bad_case_names_the_field(fields: dict, needle: str) -> None:
    base = dataclasses.asdict(CASES[0])
    base["documents"] = ((37,), (37,))
    with pytest.raises(ValueError, match=needle):
        DeltaRuleCase(**{**base, **fields})


def test_burst_puts_strong_then_weak_decay_in_one_chunk() -> None:
    case = dataclasses.replace(CASES[1], decay="burst", burst_strength=150.0, zero_chunk=None)
    g = case.materialize()["g"]
    strong = np.argwhere(g[0, :, 0, 0] < -100)[:, 0]
    assert strong.size, "no strongly decayed token"
    chunk = strong[0] // case.chunk_size
    later = g[0, strong[-1] + 1:(chunk + 1) * case.chunk_size, 0, 0]
    assert later.size and (later > -0.06).all()


_SEEN: set[str] = set()


@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(delta_rule_cases(max_chunks=3))
def _collect(case: DeltaRuleCase) -> None:
    _SEEN.update(delta_rule_events(case))


def test_strategy_reaches_the_hard_paths() -> None:
    _collect()
    wanted = {"boundary-inside-chunk", "boundary-on-chunk-edge", "single-token-document",
              "partial-last-chunk-block", "multi-chunk-block", "decay:burst", "burst>=30",
              "zero-chunk", "initial-state-with-documents", "grouped-heads", "raw-qk",
              "keys:correlated"}
    assert wanted <= _SEEN, sorted(wanted - _SEEN)


def test_correlated_keys_share_a_direction_and_erase_nearly_all() -> None:
    """keys='correlated': a head's keys near one direction (their cosines ~0.9, against ~0
    for independent keys) and b in [0.9, 1]: the chunk's (I + strictly-lower(b K K^T)) is
    far from the identity. Independent keys draw what they drew before keys existed."""
    base = dataclasses.replace(CASES[1], qk_l2norm=True, zero_chunk=None)
    x = dataclasses.replace(base, keys="correlated").materialize()
    k = x["k"][0, :, 0].astype(np.float64)
    k /= np.linalg.norm(k, axis=-1, keepdims=True)
    cos = (k @ k.T)[np.triu_indices(len(k), 1)]
    assert cos.mean() > 0.8 and x["b"].min() >= 0.9
    plain = base.materialize()
    assert np.abs(plain["b"]).min() < 0.9
    np.testing.assert_array_equal(plain["q"], dataclasses.replace(
        base, keys="correlated").materialize()["q"])


def test_chunk_variants_change_the_chunk_and_keep_the_data() -> None:
    """Block-size invariance over the chunk: a variant of a case with a zero chunk and a
    burst (both placed by chunk) has another chunk size and bitwise the same inputs; back
    at the case's own chunk it is the case itself."""
    case = DeltaRuleCase(dtype="float32", seed=5, batch=1, seq_len=40, key_dim=8,
                         value_dim=8, chunk_size=16, decay="burst", zero_chunk=2)
    hook = chunk_variants((8, 16, 32))
    seen = set()

    @settings(max_examples=30, deadline=None, derandomize=True)
    @given(hook(case))
    def variants(variant):
        seen.add(variant.chunk_size)
        assert variant == case if variant.chunk_size == 16 else variant.layout_chunk == 16
        assert variant.data_chunk == 16  # a variant's own variants keep the same layout
        for name, array in case.materialize().items():
            np.testing.assert_array_equal(variant.materialize()[name], array, err_msg=name)

    variants()
    assert seen == {8, 16, 32}
    moved = dataclasses.replace(case, chunk_size=8)  # without the hook: the data moves
    assert not np.array_equal(moved.materialize()["q"], case.materialize()["q"])


def test_burst_decay_is_an_optional_feature_a_project_can_leave_out():
    """The burst regime (two libraries' chunked float32 kernels fail it: their findings) is
    the op's optional feature: a family narrowed without it never draws it, so a project
    can declare the known bug (and every verdict names it); an unknown name is an error."""
    from hypothesis import strategies as st

    from kernel_harness.ops.delta_rule.cases import decay_regimes
    from kernel_harness.records.narrow import narrow
    from kernel_harness.records.registry import get_family

    assert decay_regimes() == ("ordinary", "weak", "burst")
    assert decay_regimes(frozenset({"burst-decay"})) == ("ordinary", "weak")
    with pytest.raises(ValueError, match="unknown features.*burst-decay"):
        decay_regimes(frozenset({"burst"}))
    strategies = [narrow(get_family(name), ["burst-decay"]).cases()
                  for name in ("gdn2-pallas", "deltanet-tpu-gdn2")]

    @settings(max_examples=25, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def never_a_burst(data):
        assert all(data.draw(s).decay != "burst" for s in strategies)

    never_a_burst()
