"""Planted bugs: wrappers around the real TPU paged attention that the family check must
catch, among them float32 kernels that round more than the contract's bfloat16 K/V.

Each test runs the family's real matches-reference property (a few derandomized examples,
no shrinking) with the buggy implementation on the interpret backend and asserts it fails.
Strategies are narrowed only so every example can reach the bug.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, settings

from kernel_harness import get_family, resolve_backend
from kernel_harness.checks.properties import HarnessFailure, matches_reference
from kernel_harness.families.tpu_paged import kernel
from kernel_harness.families.tpu_paged.cases import TpuPagedCase, tpu_paged_cases

BACKEND = resolve_backend("interpret")
F32 = tpu_paged_cases(dtypes=("float32",), quantized=(False,), megacore=(None,))


def _bf16(x):
    return x.astype(jnp.bfloat16).astype(x.dtype)


def q_in_bf16(q, *args, **kw):
    """A float32 kernel that rounds q to bfloat16 (more than its contract's K/V)."""
    return kernel.paged_attention(_bf16(q), *args, **kw)


def output_in_bf16(*args, **kw):
    """A float32 kernel whose output passes through bfloat16."""
    return _bf16(kernel.paged_attention(*args, **kw))


def kv_truncated_to_bf16(q, k, v, *args, **kw):
    """K/V rounded to bfloat16 by truncation instead of the contract's round-to-nearest."""
    def trunc(x):
        bits = jnp.asarray(x, jnp.float32).view(jnp.uint32) & jnp.uint32(0xFFFF0000)
        return bits.view(jnp.float32)
    return kernel.paged_attention(q, trunc(k), trunc(v), *args, **kw)


def drops_last_token(q, k, v, lengths, *args, **kw):
    """Each row loses its last token (an off-by-one in the length)."""
    return kernel.paged_attention(q, k, v, jnp.maximum(lengths - 1, 0), *args, **kw)


def ignores_page_table_order(q, k, v, lengths, page_indices, *args, **kw):
    """Reads each row's pages in sorted physical order instead of table order."""
    return kernel.paged_attention(q, k, v, lengths, jnp.sort(page_indices, axis=1), *args, **kw)


def _fails(impl, strategy, max_examples=5):
    family = dataclasses.replace(get_family("tpu-paged"), cases=lambda: strategy,
                                 seed_cases=lambda without: ())
    prop = settings(max_examples=max_examples, deadline=None, database=None, derandomize=True,
                    phases=(Phase.generate,), suppress_health_check=list(HealthCheck))(
        matches_reference(family, backend=BACKEND, impl=impl))
    with pytest.raises(HarnessFailure) as info:
        prop()
    return {v.stats.output for v in info.value.result.failures}


def _has_tokens(c):
    return any(c.lengths)


@pytest.mark.parametrize("impl", [q_in_bf16, output_in_bf16, kv_truncated_to_bf16],
                         ids=lambda f: f.__name__)
def test_float32_kernels_rounding_beyond_the_contract_fail(impl):
    assert _fails(impl, F32.filter(lambda c: any(n > 1 for n in c.lengths))) == {"out"}


def test_dropping_the_last_token_fails():
    assert _fails(drops_last_token, tpu_paged_cases().filter(_has_tokens)) == {"out"}


def test_reading_pages_out_of_table_order_fails():
    strategy = tpu_paged_cases().filter(
        lambda c: c.shuffle and any(n > c.page_size for n in c.lengths))
    assert _fails(ignores_page_table_order, strategy) == {"out"}


# Nightly: the pristine kernel; its goldens run per push.
@pytest.mark.nightly
def test_pristine_kernel_passes_the_same_float32_examples():
    """The control: the unmodified kernel passes where the rounding bugs fail."""
    family = dataclasses.replace(get_family("tpu-paged"), cases=lambda: F32,
                                 seed_cases=lambda without: ())
    settings(max_examples=3, deadline=None, database=None, derandomize=True,
             phases=(Phase.generate,), suppress_health_check=list(HealthCheck))(
        matches_reference(family, backend=BACKEND))()


def test_unwritten_zero_length_rows_are_excluded_only_on_the_grid_axis_path():
    fam = get_family("tpu-paged")
    case = TpuPagedCase(dtype="float32", seed=0, batch=3, q_heads=2, kv_heads=1, head_dim=64,
                        page_size=8, pages_per_seq=2, pages_per_compute_block=1,
                        lengths=(5, 0, 16), inline_seq_dim=False)
    np.testing.assert_array_equal(fam.valid(case)["out"][:, 0, 0], [True, False, True])
    assert fam.valid(dataclasses.replace(case, inline_seq_dim=True)) == {}
