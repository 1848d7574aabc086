"""Planted bugs: wrappers around the real GPU kernels that each family check must catch.

Each test runs the family's real property (Hypothesis, a few derandomized examples, no
shrinking) with the buggy implementation on the interpret backend and asserts it fails.
Strategies are narrowed (``.filter``) only so that every example can reach the bug.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import pytest
from hypothesis import HealthCheck, Phase, settings

from kernel_harness import get_family, resolve_backend
from kernel_harness.checks.properties import HarnessFailure, matches_reference
from kernel_harness.families.gpu_decode import kernel as decode_kernel
from kernel_harness.families.gpu_mha import kernel as mha_kernel
from kernel_harness.families.gpu_paged import kernel as paged_kernel
from kernel_harness.families.gpu_paged.cases import paged_cases

BACKEND = resolve_backend("interpret")


def _grad_scaled(x, factor):
    """x in the forward; its cotangent multiplied by ``factor`` in the backward."""
    return x * factor + jax.lax.stop_gradient(x - x * factor)


# --- gpu-mha ---------------------------------------------------------------------------


def mha_backward_drops_segments(q, k, v, segment_ids, **kw):
    """Right forward; gradients computed as if there were no segment ids."""
    if kw.get("return_residuals"):
        return mha_kernel.mha(q, k, v, segment_ids, **kw)
    good = mha_kernel.mha(q, k, v, segment_ids, **kw)
    plain = mha_kernel.mha(q, k, v, None, **kw)
    return plain + jax.lax.stop_gradient(good - plain)


def mha_dq_without_sm_scale(q, k, v, segment_ids, **kw):
    """dq misses its sm_scale factor (1/sqrt(head_dim) when passed as an argument)."""
    if kw.get("return_residuals"):
        return mha_kernel.mha(q, k, v, segment_ids, **kw)
    return mha_kernel.mha(_grad_scaled(q, 1.0 / kw["sm_scale"]), k, v, segment_ids, **kw)


def mha_bf16_pv(q, k, v, segment_ids, **kw):
    """A float32 kernel whose PV product secretly sees bfloat16 values of V."""
    return mha_kernel.mha(q, k, v.astype(jnp.bfloat16).astype(v.dtype), segment_ids, **kw)


def mha_lse_natural_log(q, k, v, segment_ids, **kw):
    """Returns the lse residual in natural log instead of the kernel's log2."""
    res = mha_kernel.mha(q, k, v, segment_ids, **kw)
    if kw.get("return_residuals"):
        out, lse = res
        return out, lse * math.log(2.0)
    return res


# --- gpu-decode ------------------------------------------------------------------------


def decode_ignores_start(q, k, v, start_idx, kv_seq_len, **kw):
    """Drops ``start_idx``: keys before the start leak in."""
    return decode_kernel.decode(q, k, v, None, kv_seq_len, **kw)


def decode_end_counted_from_start(q, k, v, start_idx, kv_seq_len, **kw):
    """Reads ``kv_seq_len`` as a count from ``start_idx`` instead of an end index."""
    end = jnp.minimum(start_idx + kv_seq_len, k.shape[1])
    return decode_kernel.decode(q, k, v, start_idx, end, **kw)


def decode_interleaved_gqa_heads(q, k, v, start_idx, kv_seq_len, **kw):
    """Maps q head h to kv head h % kv_heads instead of h // group."""
    q_heads, kv_heads = q.shape[1], k.shape[2]
    group = q_heads // kv_heads
    # Kernel slot s serves kv head s // group; put q head h in a slot of kv head h % kv_heads.
    slot = [(h % kv_heads) * group + h // kv_heads for h in range(q_heads)]
    inverse = [0] * q_heads
    for h, s in enumerate(slot):
        inverse[s] = h
    out, (l_, m_) = decode_kernel.decode(q[:, inverse], k, v, start_idx, kv_seq_len, **kw)
    return out[:, slot], (l_[:, slot], m_[:, slot])


# --- gpu-paged -------------------------------------------------------------------------


def paged_reads_one_page_past_length(q, k_pages, v_pages, tables, lengths, ks, vs, **kw):
    """Attends to one page more than each row's length."""
    cap = tables.shape[1] * k_pages.shape[2]
    longer = jnp.minimum(lengths + k_pages.shape[2], cap)
    return paged_kernel.paged_attention(q, k_pages, v_pages, tables, longer, ks, vs, **kw)


def paged_one_token_past_length(q, k_pages, v_pages, tables, lengths, ks, vs, **kw):
    """Off by one: attends to token ``length`` too."""
    cap = tables.shape[1] * k_pages.shape[2]
    longer = jnp.minimum(lengths + 1, cap)
    return paged_kernel.paged_attention(q, k_pages, v_pages, tables, longer, ks, vs, **kw)


def paged_table_shifted(q, k_pages, v_pages, tables, lengths, ks, vs, **kw):
    """Reads block-table entry j + 1 for logical page j."""
    return paged_kernel.paged_attention(
        q, k_pages, v_pages, jnp.roll(tables, -1, axis=1), lengths, ks, vs, **kw
    )


def paged_ignores_soft_cap(q, k_pages, v_pages, tables, lengths, ks, vs, **kw):
    """Drops the soft cap."""
    return paged_kernel.paged_attention(
        q, k_pages, v_pages, tables, lengths, ks, vs, **{**kw, "attn_logits_soft_cap": None}
    )


def paged_ignores_v_scales(q, k_pages, v_pages, tables, lengths, ks, vs, **kw):
    """Dequantizes V with unit scales."""
    ones = None if vs is None else jnp.ones_like(vs)
    return paged_kernel.paged_attention(q, k_pages, v_pages, tables, lengths, ks, ones, **kw)


# --- the checks ------------------------------------------------------------------------


def _property_fails(family_name, impl, strategy, max_examples=6):
    family = get_family(family_name)
    narrowed = dataclasses.replace(family, cases=lambda: strategy)
    prop = settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        derandomize=True,
        phases=(Phase.generate,),
        suppress_health_check=list(HealthCheck),
    )(matches_reference(narrowed, backend=BACKEND, impl=impl))
    with pytest.raises(HarnessFailure) as info:
        prop()
    return info.value.result


def _distinct_segments(case):
    return case.q_segments is not None and any(
        len({s for s, _ in row}) > 1 for row in case.q_segments
    )


def mha_cases(**kwargs):
    return get_family("gpu-mha").cases(**kwargs)


def decode_cases(**kwargs):
    return get_family("gpu-decode").cases(**kwargs)


def test_mha_backward_dropping_segment_ids_fails():
    result = _property_fails(
        "gpu-mha", mha_backward_drops_segments, mha_cases().filter(_distinct_segments)
    )
    failed = {v.stats.output for v in result.failures}
    assert failed and failed <= {"dq", "dk", "dv"}


# Nightly: one planted bug per kernel of this file runs per push.
@pytest.mark.nightly
def test_mha_dq_missing_sm_scale_fails():
    result = _property_fails(
        "gpu-mha", mha_dq_without_sm_scale, mha_cases().filter(lambda c: c.scale is None)
    )
    assert {v.stats.output for v in result.failures} == {"dq"}


# Nightly: one planted bug per kernel of this file runs per push.
@pytest.mark.nightly
def test_mha_float32_with_bf16_pv_fails():
    result = _property_fails("gpu-mha", mha_bf16_pv, mha_cases(dtypes=("float32",)))
    assert "out" in {v.stats.output for v in result.failures}


# Nightly: one planted bug per kernel of this file runs per push.
@pytest.mark.nightly
def test_mha_lse_in_wrong_base_fails():
    result = _property_fails("gpu-mha", mha_lse_natural_log, mha_cases())
    assert {v.stats.output for v in result.failures} == {"lse"}


def _some_start(case):
    start, end = case.bounds()
    return case.kv_starts is not None and bool(((start > 0) & (start < end)).any())


def test_decode_ignoring_start_fails():
    _property_fails("gpu-decode", decode_ignores_start, decode_cases().filter(_some_start))


# Nightly: one planted bug per kernel of this file runs per push.
@pytest.mark.nightly
def test_decode_end_read_as_count_fails():
    strategy = decode_cases().filter(lambda c: _some_start(c) and c.kv_lengths is not None)
    _property_fails("gpu-decode", decode_end_counted_from_start, strategy)


# Nightly: one planted bug per kernel of this file runs per push.
@pytest.mark.nightly
def test_decode_wrong_gqa_head_mapping_fails():
    strategy = decode_cases().filter(lambda c: c.kv_heads > 1 and c.group > 1)
    result = _property_fails("gpu-decode", decode_interleaved_gqa_heads, strategy)
    assert "out" in {v.stats.output for v in result.failures}


def _short_row(case):
    return case.lengths is not None and min(case.lengths) < case.capacity


def test_paged_reading_one_page_past_length_fails():
    _property_fails(
        "gpu-paged", paged_reads_one_page_past_length, paged_cases().filter(_short_row)
    )


# Nightly: one planted bug per kernel of this file runs per push.
@pytest.mark.nightly
def test_paged_off_by_one_token_fails():
    _property_fails("gpu-paged", paged_one_token_past_length, paged_cases().filter(_short_row))


# Nightly: one planted bug per kernel of this file runs per push.
@pytest.mark.nightly
def test_paged_shifted_block_table_fails():
    strategy = paged_cases().filter(lambda c: c.pages_per_seq > 1)
    _property_fails("gpu-paged", paged_table_shifted, strategy)


# Nightly: one planted bug per kernel of this file runs per push.
@pytest.mark.nightly
def test_paged_ignoring_soft_cap_fails():
    strategy = paged_cases().filter(lambda c: c.soft_cap is not None)
    _property_fails("gpu-paged", paged_ignores_soft_cap, strategy)


# Nightly: one planted bug per kernel of this file runs per push.
@pytest.mark.nightly
def test_paged_ignoring_v_scales_fails():
    strategy = paged_cases().filter(lambda c: c.quantized)
    _property_fails("gpu-paged", paged_ignores_v_scales, strategy)
