"""The attention op's one program (ops/attention/program.py): every attention family's
reference, checked here against float64 loops, with each declared contract option."""

from __future__ import annotations

import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from kernel_harness.ops.attention import export as attention_export
from kernel_harness.ops.attention import program
from kernel_harness.ops.attention.program import AttentionCall, Definition, run_call

CPU = jax.devices("cpu")[0]
ROOT = Path(__file__).resolve().parents[2]


def _loops(q, k, v, vis, scale, *, bias=None, before=False, cap=None, sinks=None):
    """out and natural lse of [b, h, q, d] arrays (GQA by h // group), float64, row by row."""
    b, h, tq, _ = q.shape
    group = h // k.shape[1]
    out, lse = np.zeros(q.shape[:3] + (v.shape[-1],)), np.full((b, h, tq), -np.inf)
    for bi in range(b):
        for hi in range(h):
            for i in range(tq):
                keys = [j for j in range(k.shape[2]) if vis[bi, hi, i, j]]
                s = np.array([q[bi, hi, i] @ k[bi, hi // group, j] for j in keys])
                add = np.array([0.0 if bias is None else bias[bi, hi, i, j] for j in keys])
                s = (s + add) * scale if before else s * scale + add
                if cap is not None:
                    s = cap * np.tanh(s / cap)
                extra = [] if sinks is None else [sinks[hi]]
                if not len(s) and not extra:
                    continue
                m = max([*s, *extra])
                e = np.exp(s - m)
                denom = e.sum() + sum(np.exp(x - m) for x in extra)
                pv = sum(ej * v[bi, hi // group, j] for ej, j in zip(e, keys, strict=True))
                out[bi, hi, i] = pv / denom
                lse[bi, hi, i] = m + math.log(denom)
    return out, lse


def _arrays(seed=0, b=2, h=4, kvh=2, tq=5, tk=7, d=3):
    rng = np.random.default_rng(seed)
    x = {n: rng.standard_normal(s).astype(np.float32) for n, s in (
        ("q", (b, h, tq, d)), ("k", (b, kvh, tk, d)), ("v", (b, kvh, tk, d)),
        ("do", (b, h, tq, d)), ("bias", (b, h, tq, tk)))}
    vis = rng.random((b, h, tq, tk)) < 0.6
    vis[1, 2, 3] = False  # a row that sees no key
    return x, vis


@pytest.mark.parametrize("before", [False, True])
@pytest.mark.parametrize("cap", [None, 2.0])
def test_the_program_matches_loops_for_each_contract_option(before, cap):
    x, vis = _arrays()
    contract = Definition(layout="bhqd", scale=0.7, bias_before_scale=before, soft_cap=cap,
                        lse="natural")
    got = run_call(AttentionCall(definition=contract, q=x["q"], k=x["k"], v=x["v"], vis=vis,
                                 bias=x["bias"]), np.float32, CPU)
    want_out, want_lse = _loops(*(x[n].astype(np.float64) for n in ("q", "k", "v")), vis, 0.7,
                                bias=x["bias"], before=before, cap=cap)
    np.testing.assert_allclose(got["out"], want_out, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got["out"][1, 2, 3], 0.0)
    assert np.isneginf(got["lse"][1, 2, 3])
    finite = np.isfinite(want_lse)
    np.testing.assert_allclose(got["lse"][finite], want_lse[finite], rtol=1e-5)
    assert set(got) == {"out", "lse"}  # forward only: no cotangent, no gradients


def test_sinks_normalize_and_base2_lse_in_the_other_layout():
    x, vis = _arrays(seed=1)
    sinks = np.array([0.3, -0.5, 1.0, 0.0], np.float32)
    to_bqhd = lambda a: np.swapaxes(a, 1, 2)  # noqa: E731
    for normalize in ("probs", "output"):
        contract = Definition(layout="bqhd", scale=1.0, normalize=normalize, lse="base2")
        got = run_call(AttentionCall(definition=contract, q=to_bqhd(x["q"]), k=to_bqhd(x["k"]),
                                     v=to_bqhd(x["v"]), vis=vis, sinks=sinks), np.float32, CPU)
        want_out, want_lse = _loops(*(x[n].astype(np.float64) for n in ("q", "k", "v")), vis,
                                    1.0, sinks=sinks)
        np.testing.assert_allclose(got["out"], to_bqhd(want_out), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got["lse"], want_lse / math.log(2.0), rtol=1e-5)
    unnormalized = run_call(AttentionCall(
        definition=Definition(layout="bhqd", normalize="none", lse="natural"), q=x["q"], k=x["k"],
        v=x["v"], vis=vis), np.float32, CPU)
    normalized = run_call(AttentionCall(definition=Definition(layout="bhqd"), q=x["q"], k=x["k"],
                                        v=x["v"], vis=vis), np.float32, CPU)
    # unnormalized out = normalized out * sum_j exp(s_j - m): never the same where a row
    # sees more than one key, so the option cannot be ignored
    assert not np.allclose(unnormalized["out"], normalized["out"])


def test_gradients_renames_absent_outputs_and_magnitudes():
    x, vis = _arrays(seed=2)
    contract = Definition(layout="bhqd", scale=0.5, magnitudes=("dq", "dk"))
    call = AttentionCall(definition=contract, q=x["q"], k=x["k"], v=x["v"], vis=vis, do=x["do"],
                         names={"dv": "dvalue"}, absent={"dbias": (1, 1, 1, 1)})
    got = run_call(call, np.float32, CPU)
    assert set(got) == {"out", "dq", "dk", "dvalue", "dbias", "dq:magnitude", "dk:magnitude"}
    np.testing.assert_array_equal(got["dbias"], np.zeros((1, 1, 1, 1)))

    def loss(q, k, v):
        out, _ = _jnp_attention(q, k, v, vis, 0.5)
        return jnp.sum(out * x["do"])

    want = jax.grad(loss, argnums=(0, 1, 2))(*(jnp.asarray(x[n]) for n in ("q", "k", "v")))
    for name, w in zip(("dq", "dk", "dvalue"), want, strict=True):
        np.testing.assert_allclose(got[name], np.asarray(w), rtol=1e-4, atol=1e-5)
    # every gradient is bounded by the sum of its terms' sizes, and the GQA sum over the
    # query heads sharing a kv head is taken (dk has the kv heads' shape)
    assert got["dk:magnitude"].shape == x["k"].shape
    assert np.all(np.abs(got["dq"]) <= got["dq:magnitude"] * (1 + 1e-5) + 1e-6)
    assert np.all(np.abs(got["dk"]) <= got["dk:magnitude"] * (1 + 1e-5) + 1e-6)


@pytest.mark.parametrize(("before", "bias_shape"), [
    (False, (2, 4, 5, 7)), (False, (1, 4, 5, 7)), (True, (2, 1, 5, 7))])
def test_the_bias_gradients_magnitude_bounds_it_and_follows_its_name(before, bias_shape):
    """dbias is dS (times the scale when the bias comes first), summed over the axes a shared
    bias broadcasts along; its magnitude is summed the same way, under the family's name."""
    x, vis = _arrays(seed=4)
    x["bias"] = x["bias"][tuple(slice(0, n) for n in bias_shape)]
    contract = Definition(layout="bhqd", scale=0.5, bias_before_scale=before,
                        magnitudes=("dbias",))
    call = AttentionCall(definition=contract, q=x["q"], k=x["k"], v=x["v"], vis=vis, do=x["do"],
                         bias=x["bias"], names={"dbias": "dab"})
    got = run_call(call, np.float32, CPU)
    assert {"dab", "dab:magnitude"} <= set(got) and "dbias:magnitude" not in got
    assert got["dab"].shape == got["dab:magnitude"].shape == bias_shape
    assert np.all(np.abs(got["dab"]) <= got["dab:magnitude"] * (1 + 1e-5) + 1e-7)
    assert got["dab:magnitude"].max() > 10 * np.abs(got["dab"]).min()


def _jnp_attention(q, k, v, vis, scale):
    group = q.shape[1] // k.shape[1]
    k, v = jnp.repeat(k, group, 1), jnp.repeat(v, group, 1)
    s = jnp.where(vis, jnp.einsum("bhqd,bhkd->bhqk", q, k, precision="highest") * scale, -1e30)
    p = jnp.where(vis, jnp.exp(s - jnp.max(s, -1, keepdims=True)), 0.0)
    denom = jnp.sum(p, -1, keepdims=True)
    p = p / jnp.where(denom > 0, denom, 1.0)
    return jnp.einsum("bhqk,bhkd->bhqd", p, v, precision="highest"), None


def test_an_unknown_option_is_a_clear_error():
    with pytest.raises(ValueError, match="normalize must be one of"):
        Definition(layout="bhqd", normalize="rows")
    with pytest.raises(ValueError, match="lse must be one of"):
        Definition(layout="bhqd", lse="log10")
    with pytest.raises(ValueError, match="magnitudes: unknown"):
        Definition(layout="bhqd", magnitudes=("dv",))


def test_the_exported_call_computes_what_the_program_computes():
    """An exported script calls ``attend`` with ``Definition.attend_source``: the same options."""
    x, vis = _arrays(seed=3)
    sinks = np.array([0.3, -0.5, 1.0, 0.0], np.float32)
    contract = Definition(layout="bhqd", scale=0.9, soft_cap=3.0, normalize="output")
    scope = {"jax": jax, "jnp": jnp, "np": np, "HI": jax.lax.Precision.HIGHEST}
    exec(attention_export.op_source(), scope)  # noqa: S102
    scope.update(q=x["q"], k=x["k"], v=x["v"], vis=jnp.asarray(vis), sinks=jnp.asarray(sinks))
    out, _ = eval(contract.attend_source(sinks="sinks"), scope)  # noqa: S307
    got = run_call(AttentionCall(definition=contract, q=x["q"], k=x["k"], v=x["v"], vis=vis,
                                 sinks=sinks), np.float32, CPU)
    np.testing.assert_allclose(np.asarray(out), got["out"], rtol=1e-6, atol=1e-6)


def test_no_family_has_a_reference_of_its_own():
    """Every built-in family's reference is its op's (issue: one op, one reference)."""
    assert sorted(ROOT.glob("kernel_harness/families/*/reference.py")) == []


def test_heads_first_puts_heads_before_positions_in_either_layout():
    x = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)  # bqhd: batch, q_len 3, heads 4, dim
    np.testing.assert_array_equal(program.heads_first(x, "bqhd"), np.swapaxes(x, 1, 2))
    np.testing.assert_array_equal(program.heads_first(x, "bhqd"), x)
