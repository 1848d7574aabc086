"""gpu-paged's op relations: each passes on the pristine kernel and fails on a planted bug
it is there to catch; the ci draw reaches every mode the strategy declares."""

from __future__ import annotations

import jax.numpy as jnp
import pytest

from kernel_harness.families.gpu_paged import kernel
from kernel_harness.families.gpu_paged.cases import PagedCase, paged_cases
from kernel_harness.families.gpu_paged.family import FAMILY
from tests.families.paged_decode.helpers import fails, passes
from tests.helpers.mode_reach import assert_reaches, reach

#: Unshuffled (rows' pages in ascending physical order), no sharing, ends mid-page.
IN_ORDER = PagedCase(dtype="float32", seed=3, batch=2, q_heads=4, kv_heads=2, head_dim=16,
                     page_size=16, pages_per_seq=4, lengths=(21, 50), shuffle=False,
                     spare_pages=1, pages_per_compute_block=1, k_splits=1)


def sorted_table(q, k, v, tables, *args, **kw):
    """Reads each row's pages in ascending physical order, not the table's."""
    return kernel.paged_attention(q, k, v, jnp.sort(tables, axis=1), *args, **kw)


def leaks_unseen(q, k, v, *args, **kw):
    """Adds a trace (1e-6 x scale, under the float32 tolerance) of the mean V of the whole
    cache, unseen slots included."""
    out = kernel.paged_attention(q, k, v, *args, **kw)
    return out + 1e-6 * jnp.tanh(jnp.mean(jnp.nan_to_num(v.astype(jnp.float32))))


def last_token_lost_in_other_tilings(q, k, v, tables, lengths, *args, **kw):
    """With several pages per compute block or several splits, each row's last token is
    dropped."""
    if kw["pages_per_compute_block"] != 1 or kw["k_splits"] != 1:
        lengths = jnp.maximum(lengths - 1, 0)
    return kernel.paged_attention(q, k, v, tables, lengths, *args, **kw)


# Nightly: tpu-paged's same relations catch their planted bugs per push.
@pytest.mark.nightly
def test_page_permutation():
    fails("gpu-paged", "page-permutation", [IN_ORDER], sorted_table)


@pytest.mark.nightly  # the pristine kernel's half: docs/ci.md
def test_page_permutation_on_the_pristine_kernel():
    passes("gpu-paged", "page-permutation", [IN_ORDER])


# Nightly: tpu-paged's same relations catch their planted bugs per push.
@pytest.mark.nightly
def test_unseen_slots_ignored_is_bitwise():
    assert "bitwise" in fails("gpu-paged", "unseen-slots-ignored", [IN_ORDER], leaks_unseen)


@pytest.mark.nightly  # the pristine kernel's half: docs/ci.md
def test_unseen_slots_ignored_is_bitwise_on_the_pristine_kernel():
    passes("gpu-paged", "unseen-slots-ignored", [IN_ORDER])


# Nightly: tpu-paged's same relations catch their planted bugs per push.
@pytest.mark.nightly
def test_compute_block_invariance():
    fails("gpu-paged", "compute-block-invariance", [IN_ORDER],
          last_token_lost_in_other_tilings)


@pytest.mark.nightly  # the pristine kernel's half: docs/ci.md
def test_compute_block_invariance_on_the_pristine_kernel():
    passes("gpu-paged", "compute-block-invariance", [IN_ORDER])


def test_ci_draw_reaches_every_mode():
    modes = {"partial-page", "multi-split", "multi-compute-block", "pages-per-compute-block>1",
             "int8-pages", "head-splits", "head-padding", "mqa", "gqa", "mha-heads",
             "shared-pages", "soft-cap", "no-lengths", "rows-without-keys", "reads-masked-slots"}
    assert_reaches(reach(paged_cases(), FAMILY.events), modes, "gpu-paged")
