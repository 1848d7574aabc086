"""tpu-ragged-paged's op relations and its optional features (``--without``): each
relation passes on the pristine kernel and fails on a planted bug; a narrowed strategy
never draws the feature it leaves out."""

from __future__ import annotations

import jax.numpy as jnp
import pytest

from kernel_harness import get_family
from kernel_harness.families.tpu_ragged_paged import kernel
from kernel_harness.families.tpu_ragged_paged.cases import (
    OPTIONAL,
    RaggedCase,
    features,
    ragged_cases,
    ragged_seed_cases,
)
from kernel_harness.records.narrow import narrow
from tests.families.paged_decode.helpers import fails, passes
from tests.helpers.mode_reach import assert_reaches, reach

CASE = RaggedCase(dtype="float32", seed=5, q_lens=(1, 3), kv_lens=(7, 12), max_num_seqs=3,
                  max_tokens=5, q_heads=4, kv_heads=2, page_size=4, pages_per_seq=4,
                  kv_pages_per_block=2, queries_per_block=4, poison=True)


def sorted_table(q, kv_pages, kv_lens, page_indices, *args, **kw):
    """Reads each sequence's pages in ascending physical order, not the table's."""
    return kernel.ragged_paged_attention(q, kv_pages, kv_lens, jnp.sort(page_indices, axis=1),
                                         *args, **kw)


def leaks_unseen(q, kv_pages, *args, **kw):
    """Adds a trace (1e-6 x scale, under the float32 tolerance) of the mean of the whole
    cache, unowned slots included."""
    out = kernel.ragged_paged_attention(q, kv_pages, *args, **kw)
    return out + 1e-6 * jnp.tanh(jnp.mean(jnp.nan_to_num(kv_pages.astype(jnp.float32))))


def test_page_permutation():
    fails("tpu-ragged-paged", "page-permutation", [CASE], sorted_table)


@pytest.mark.nightly  # the pristine kernel's half: docs/ci.md
def test_page_permutation_on_the_pristine_kernel():
    passes("tpu-ragged-paged", "page-permutation", [CASE])


def test_unseen_slots_ignored_is_bitwise():
    assert "bitwise" in fails("tpu-ragged-paged", "unseen-slots-ignored", [CASE], leaks_unseen)


@pytest.mark.nightly  # the pristine kernel's half: docs/ci.md
def test_unseen_slots_ignored_is_bitwise_on_the_pristine_kernel():
    passes("tpu-ragged-paged", "unseen-slots-ignored", [CASE])


def test_the_full_strategy_draws_every_optional_feature():
    assert_reaches(reach(ragged_cases(), features), OPTIONAL, "tpu-ragged-paged")


# One feature per push (the narrowing is one path); every feature nightly.
@pytest.mark.parametrize("feature", [f if f == "gqa" else pytest.param(f, marks=pytest.mark.nightly)
                                     for f in sorted(OPTIONAL)])
def test_a_narrowed_family_never_draws_the_feature(feature):
    family = narrow(get_family("tpu-ragged-paged"), [feature])
    assert feature in family.without
    assert feature not in reach(family.cases(), features)
    assert all(feature not in features(c) for c in family.seed_cases(family.without))


def test_an_unknown_feature_is_an_error():
    with pytest.raises(ValueError, match="no optional features"):
        ragged_seed_cases(frozenset({"bias"}))



def test_ci_draw_reaches_every_mode():
    from kernel_harness.families.tpu_ragged_paged.family import events

    modes = {"decode-seq", "prefill-seq", "mixed-prefill-decode", "seq-without-queries",
             "multi-seq", "num-seqs-below-max", "padding-q-rows", "kv-len-mid-page",
             "multi-kv-block", "seq-spans-q-blocks", "seq-ends-at-q-block-end",
             "q-block-shared-by-seqs", "mha-heads", "gqa", "mqa", "window-cuts-keys",
             "soft-cap", "large-logits", "nan-in-unowned-cache-slots"}
    assert_reaches(reach(ragged_cases(), events), modes, "tpu-ragged-paged")
