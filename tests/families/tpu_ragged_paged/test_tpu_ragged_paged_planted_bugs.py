"""Planted bugs: wrappers around the real ragged paged attention kernel that the family
check must catch (and one it must not: garbage in padding rows is outside the contract).

Each test runs the family's real matches-reference property (a few derandomized examples,
no shrinking) with the wrapper on the interpret backend (TPU interpret mode). Strategies
are narrowed only so every example can reach the bug.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import pytest
from hypothesis import HealthCheck, Phase, settings

from kernel_harness import get_family, resolve_backend
from kernel_harness.checks.properties import HarnessFailure, matches_reference
from kernel_harness.families.tpu_ragged_paged import kernel
from kernel_harness.families.tpu_ragged_paged.cases import ragged_cases

BACKEND = resolve_backend("interpret")


def rpa_in_bf16(q, kv_pages, *args, **kwargs):
    """A float32 kernel whose operands are secretly rounded to bfloat16."""
    return kernel.ragged_paged_attention(q.astype(jnp.bfloat16).astype(q.dtype),
                                         kv_pages.astype(jnp.bfloat16).astype(kv_pages.dtype),
                                         *args, **kwargs)


def rpa_pages_shifted(q, kv_pages, kv_lens, page_indices, *args, **kwargs):
    """Off by one in the page table: token t is read from page table entry t//ps + 1."""
    return kernel.ragged_paged_attention(q, kv_pages, kv_lens,
                                         jnp.roll(page_indices, -1, axis=1), *args, **kwargs)


def rpa_no_window(*args, sliding_window=None, **kwargs):
    """The sliding window is dropped."""
    return kernel.ragged_paged_attention(*args, sliding_window=None, **kwargs)


def rpa_last_seq_one_short(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs,
                           **kwargs):
    """The last active sequence's last query row is treated as padding (left stale)."""
    end = cu_q_lens[num_seqs[0]]
    out = kernel.ragged_paged_attention(q, kv_pages, kv_lens, page_indices, cu_q_lens,
                                        num_seqs, **kwargs)
    return out.at[end - 1].set(0)


def rpa_nan_padding(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs, **kwargs):
    """Correct rows; NaN in every padding row (allowed: outside the contract)."""
    out = kernel.ragged_paged_attention(q, kv_pages, kv_lens, page_indices, cu_q_lens,
                                        num_seqs, **kwargs)
    rows = jnp.arange(q.shape[0])[:, None, None]
    return jnp.where(rows >= cu_q_lens[num_seqs[0]], jnp.nan, out).astype(out.dtype)


def _property(impl, strategy, max_examples):
    family = dataclasses.replace(get_family("tpu-ragged-paged"), cases=lambda: strategy,
                                 seed_cases=lambda without: ())
    return settings(max_examples=max_examples, deadline=None, database=None,
                    derandomize=True, phases=(Phase.generate,),
                    suppress_health_check=list(HealthCheck))(
        matches_reference(family, backend=BACKEND, impl=impl))


def _fails(impl, strategy, max_examples=4):
    with pytest.raises(HarnessFailure) as info:
        _property(impl, strategy, max_examples)()
    return {v.stats.output for v in info.value.result.failures}


def test_float32_kernel_in_bf16_fails():
    assert "out" in _fails(rpa_in_bf16, ragged_cases(dtypes=("float32",)))


def test_page_table_off_by_one_fails():
    strategy = ragged_cases().filter(lambda c: c.pages_per_seq > 1 and max(c.kv_lens) > 1)
    assert "out" in _fails(rpa_pages_shifted, strategy)


def test_dropped_sliding_window_fails():
    strategy = ragged_cases().filter(
        lambda c: c.sliding_window is not None
        and any(kv - q >= c.sliding_window for q, kv in zip(c.q_lens, c.kv_lens, strict=True)))
    assert "out" in _fails(rpa_no_window, strategy)


def test_last_row_left_out_fails():
    assert "out" in _fails(rpa_last_seq_one_short, ragged_cases(), max_examples=2)


def test_garbage_in_padding_rows_passes():
    """Padding rows are excluded, not compared: NaN there is no failure."""
    strategy = ragged_cases().filter(lambda c: c.total_tokens < c.max_tokens)
    _property(rpa_nan_padding, strategy, max_examples=2)()


def test_unknown_kernel_signature_is_a_loud_error():
    """A kernel without the keywords the adapter passes is an error naming the jax
    version, never a call with arguments dropped."""
    import jax

    from kernel_harness.families.tpu_ragged_paged.cases import ragged_seed_cases

    def old_kernel(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs, *, sm_scale,
                   sliding_window, soft_cap, num_kv_pages_per_block):
        raise AssertionError("must not be called")

    case = ragged_seed_cases()[0]
    with pytest.raises(kernel.KernelSignatureError) as err:
        kernel.run(old_kernel, case, case.materialize(), BACKEND)
    assert "num_queries_per_block" in str(err.value) and jax.__version__ in str(err.value)
