"""The tpu-paged reference against hand-computed values and numpy loops; the case's
page tables and poison."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest

from kernel_harness.families.tpu_paged.cases import MASKED_V, TpuPagedCase
from kernel_harness.families.tpu_paged.family import FAMILY

reference = FAMILY.reference


def _tiny_case(**kw):
    base = dict(dtype="float32", seed=0, batch=1, q_heads=1, kv_heads=1, head_dim=2,
                page_size=2, pages_per_seq=2, pages_per_compute_block=1, lengths=(3,),
                spare_pages=0, shuffle=False)
    return TpuPagedCase(**{**base, **kw})


def test_tiny_case_by_hand():
    """q = [1, 0]; tokens (pages [1, 0]) k0=[0,0] k1=[ln 2, 0] k2=[ln 4, 9] (k3 masked);
    logits 0, ln2, ln4 -> weights 1/7, 2/7, 4/7 over v = 7, 14, 0 -> out = 1 + 4 + 0 = 5."""
    case = _tiny_case()
    # physical page 1 holds tokens 0-1, page 0 holds tokens 2-3 (table row [1, 0])
    k = np.zeros((1, 2, 2, 2), np.float32)
    v = np.zeros((1, 2, 2, 2), np.float32)
    k[0, 1, 0], k[0, 1, 1] = [0, 0], [np.log(2), 0]
    k[0, 0, 0], k[0, 0, 1] = [np.log(4), 9], [50, 50]
    v[0, 1, 0], v[0, 1, 1], v[0, 0, 0], v[0, 0, 1] = [7, 1], [14, 2], [0, 3], [1e3, 1e3]
    # log 2 and log 4 are rounded to bfloat16 by the contract: use the rounded logits.
    kb = np.asarray(jnp.asarray(k).astype(jnp.bfloat16).astype(jnp.float32))
    logits = np.array([0.0, kb[0, 1, 1, 0], kb[0, 0, 0, 0]])
    w = np.exp(logits) / np.exp(logits).sum()
    inputs = {"q": np.array([[[1.0, 0.0]]], np.float32), "k_pages": k, "v_pages": v,
              "lengths": np.array([3], np.int32),
              "page_indices": np.array([[1, 0]], np.int32)}
    out = reference(case, inputs)["out"]
    np.testing.assert_allclose(out[0, 0], w @ np.array([[7, 1], [14, 2], [0, 3]]), rtol=1e-6)
    np.testing.assert_allclose(out[0, 0, 0], 5.0, rtol=1e-2)  # the exact-logit value


def _by_loops(case: TpuPagedCase, x: dict[str, np.ndarray]) -> np.ndarray:
    """float64 loops over rows, heads and tokens; K/V rounded as the contract says."""
    if case.quantized:
        k = x["k_pages"] * x["k_scales"].astype(np.float64) / 127.5
        v = x["v_pages"] * x["v_scales"].astype(np.float64) / 127.5
    else:
        k, v = (np.asarray(jnp.asarray(x[n], jnp.float32).astype(jnp.bfloat16)
                           .astype(jnp.float32), np.float64) for n in ("k_pages", "v_pages"))
    q = np.asarray(x["q"], np.float64)
    out = np.zeros(q.shape)
    for b in range(case.batch):
        toks = [(x["page_indices"][b, t // case.page_size], t % case.page_size)
                for t in range(case.lengths[b])]
        for h in range(case.q_heads):
            if not toks:
                continue
            kh = h // case.group
            kk = np.stack([k[kh, p, s] for p, s in toks])
            vv = np.stack([v[kh, p, s] for p, s in toks])
            s_ = kk @ q[b, h]
            if case.soft_cap is not None:
                s_ = case.soft_cap * np.tanh(s_ / case.soft_cap)
            w = np.exp(s_ - s_.max())
            out[b, h] = (w / w.sum()) @ vv
    return out


@pytest.mark.parametrize("case", [
    TpuPagedCase(dtype="float32", seed=3, batch=3, q_heads=4, kv_heads=2, head_dim=8,
                 page_size=4, pages_per_seq=4, pages_per_compute_block=2, lengths=(7, 0, 16),
                 shared_pages=2, soft_cap=2.0),
    TpuPagedCase(dtype="bfloat16", seed=4, batch=2, q_heads=3, kv_heads=1, head_dim=8,
                 page_size=4, pages_per_seq=2, pages_per_compute_block=1, lengths=(5, 1),
                 quantized=True, spare_pages=2),
])
def test_reference_matches_loops(case):
    x = case.materialize()
    np.testing.assert_allclose(reference(case, x)["out"], _by_loops(case, x), rtol=1e-5,
                               atol=1e-5)


def test_zero_length_rows_are_zero_and_poison_is_where_the_contract_says():
    case = TpuPagedCase(dtype="float32", seed=5, batch=3, q_heads=2, kv_heads=1, head_dim=4,
                        page_size=4, pages_per_seq=4, pages_per_compute_block=2,
                        lengths=(5, 0, 9), shared_pages=1, spare_pages=1)
    x = case.materialize()
    assert not reference(case, x)["out"][1].any()
    table, k, v = x["page_indices"], x["k_pages"], x["v_pages"]
    assert table[0, 0] == table[2, 0] != table[1, 0]  # shared only by rows that reach it
    # row 0 (length 5) loads block 0 (entries 0-1): slots 5-7 masked and finite
    assert np.all(np.abs(v[0, table[0, 1], 1:]) == MASKED_V) and not k[0, table[0, 1], 1:].any()
    # row 0's entries 2-3 are never loaded: NaN; row 2 (length 9) loads entries 0-3
    assert np.isnan(k[0, table[0, 2]]).all() and np.isfinite(k[0, table[2, 3]]).all()
    assert np.isnan(k[0, table[1]]).all()  # the empty row loads nothing
    assert len(set(table.ravel().tolist())) == case.total_pages - case.spare_pages


def test_case_rejects_invalid_settings():
    ok = _tiny_case()
    with pytest.raises(ValueError, match="divide"):
        dataclasses.replace(ok, pages_per_compute_block=3, pages_per_seq=4)
    with pytest.raises(ValueError, match="even batch"):
        dataclasses.replace(ok, megacore_mode="batch")
    with pytest.raises(ValueError, match="even kv_heads"):
        dataclasses.replace(ok, megacore_mode="kv_head")
    with pytest.raises(ValueError, match="lengths"):
        dataclasses.replace(ok, lengths=(5,))
    with pytest.raises(ValueError, match="float32"):
        dataclasses.replace(ok, dtype="float16")
