"""tpu-paged's op relations (page-permutation, unseen-slots-ignored,
compute-block-invariance) and the built-in metamorphic properties its hooks enable: each
passes on the pristine kernel and fails on a planted bug it is there to catch; the ci
draw reaches every mode the strategy declares."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from kernel_harness.families.tpu_paged import kernel
from kernel_harness.families.tpu_paged.cases import TpuPagedCase, tpu_paged_cases
from kernel_harness.families.tpu_paged.family import events
from tests.families.paged_decode.helpers import fails, passes
from tests.helpers.mode_reach import assert_reaches, reach

#: Unshuffled (rows' pages in ascending physical order), no sharing, ends mid-page.
IN_ORDER = TpuPagedCase(dtype="float32", seed=3, batch=2, q_heads=4, kv_heads=2, head_dim=128,
                        page_size=8, pages_per_seq=4, pages_per_compute_block=1,
                        lengths=(21, 30), shuffle=False, spare_pages=1)


def sorted_table(q, k, v, lengths, page_indices, **kw):
    """Reads each row's pages in ascending physical order, not the table's."""
    return kernel.paged_attention(q, k, v, lengths, jnp.sort(page_indices, axis=1), **kw)


def leaks_unseen(q, k, v, lengths, page_indices, **kw):
    """Adds a trace (1e-7 x scale, far under the float32 tolerance) of the mean V of the
    whole cache, unseen slots included: matches-reference passes it, nothing bitwise does."""
    out = kernel.paged_attention(q, k, v, lengths, page_indices, **kw)
    v32 = jnp.nan_to_num(v.astype(jnp.float32))
    return out + 1e-7 * jnp.tanh(jnp.mean(v32))


def last_token_lost_in_multipage_blocks(q, k, v, lengths, page_indices, **kw):
    """With several pages per compute block, each row's last token is dropped."""
    if kw["pages_per_compute_block"] > 1:
        lengths = jnp.maximum(lengths - 1, 0)
    return kernel.paged_attention(q, k, v, lengths, page_indices, **kw)


def test_page_permutation():
    fails("tpu-paged", "page-permutation", [IN_ORDER], sorted_table)


@pytest.mark.nightly  # the pristine kernel's half: docs/ci.md
def test_page_permutation_on_the_pristine_kernel():
    passes("tpu-paged", "page-permutation", [IN_ORDER])


def test_unseen_slots_ignored_is_bitwise():
    assert "bitwise" in fails("tpu-paged", "unseen-slots-ignored", [IN_ORDER], leaks_unseen)


@pytest.mark.nightly  # the pristine kernel's half: docs/ci.md
def test_unseen_slots_ignored_is_bitwise_on_the_pristine_kernel():
    passes("tpu-paged", "unseen-slots-ignored", [IN_ORDER])


def test_compute_block_invariance():
    fails("tpu-paged", "compute-block-invariance", [IN_ORDER],
          last_token_lost_in_multipage_blocks)


@pytest.mark.nightly  # the pristine kernel's half: docs/ci.md
def test_compute_block_invariance_on_the_pristine_kernel():
    passes("tpu-paged", "compute-block-invariance", [IN_ORDER])


def test_ci_draw_reaches_every_mode():
    modes = {"megacore-off", "megacore-batch", "megacore-kv_head",
             "megacore-kv_head-several-heads-per-core", "inline-seq-dim", "seq-grid-axis",
             "kv-heads>=4", "partial-page", "multi-compute-block", "pages-per-compute-block>1",
             "int8-kv", "group-multiple-of-8", "mqa", "gqa", "shared-pages", "soft-cap"}
    assert_reaches(reach(tpu_paged_cases(), events), modes, "tpu-paged")


def interleaved_heads(q, k, v, *args, **kw):
    """Query head h reads kv head h % kv_heads instead of h // group (a head-mapping bug;
    right for MHA, where both are h)."""
    heads, kv_heads = q.shape[1], k.shape[0]
    perm = np.argsort(np.arange(heads) % kv_heads, kind="stable")
    out = kernel.paged_attention(q[:, perm], k, v, *args, **kw)
    return out[:, np.argsort(perm)]


def test_gqa_equals_mha_catches_a_head_mapping_bug():
    fails("tpu-paged", "gqa-equals-mha", [IN_ORDER], interleaved_heads)


@pytest.mark.nightly  # the pristine kernel's half: docs/ci.md
def test_gqa_equals_mha_catches_a_head_mapping_bug_on_the_pristine_kernel():
    passes("tpu-paged", "gqa-equals-mha", [IN_ORDER])
