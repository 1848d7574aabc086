"""tpu-ragged-paged's layout mapping onto the paged-decode op and its metamorphic hooks."""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import strategies as st

from kernel_harness.core.case import Arrays
from kernel_harness.families.tpu_ragged_paged.cases import RaggedCase
from kernel_harness.families.tpu_ragged_paged.kernel import traceable
from kernel_harness.ops.paged_attention.layout import PagedLayout, finite_pages
from kernel_harness.ops.paged_attention.ragged_record import exclusion
from kernel_harness.ops.paged_attention.relations import page_permutation, unseen_slots_ignored
from kernel_harness.records.hooks import Metamorphic

#: kv_pages [total_pages, page_size, 2 * kv_heads, head_dim]: pages on axis 0; every
#: page-table entry (padding slots' too) is a valid page.
LAYOUT = PagedLayout(pages={"kv_pages": 0}, table="page_indices",
                     unseen=lambda case, inputs: ~case.owned_slots())


def block_variants(case: RaggedCase) -> st.SearchStrategy[RaggedCase]:
    """The case with other kv pages per block and queries per block (the same inputs)."""
    return st.builds(lambda kv, qb: dataclasses.replace(
        case, kv_pages_per_block=kv, queries_per_block=qb),
        st.integers(1, case.pages_per_seq), st.sampled_from((8, 2, 4, 16)))


def as_mha(case: RaggedCase, inputs: Arrays) -> tuple[RaggedCase, Arrays] | None:
    """The same problem with each kv head's K and V repeated for every query head of its
    group (re-interleaved: K of head h at combined head 2h, V at 2h + 1)."""
    ratio = case.q_heads // case.kv_heads
    if ratio == 1:
        return None
    kv = np.asarray(inputs["kv_pages"])
    k = np.repeat(kv[:, :, 0::2], ratio, axis=2)
    v = np.repeat(kv[:, :, 1::2], ratio, axis=2)
    both = np.empty(kv.shape[:2] + (2 * case.q_heads,) + kv.shape[3:], kv.dtype)
    both[:, :, 0::2], both[:, :, 1::2] = k, v
    return dataclasses.replace(case, kv_heads=case.q_heads), {**inputs, "kv_pages": both}


#: What the contract leaves out: the op's padding rows of ``out`` (they may hold anything).
EXCLUDED = exclusion()


METAMORPHIC = Metamorphic(
    roles={"q": (None, "head", "dim"), "kv_pages": (None, None, None, "dim"),
           "out": (None, "head", "dim")},
    block_variants=block_variants, as_mha=as_mha, logit_input="q",
    may_be_nonfinite=EXCLUDED, constrain=finite_pages(LAYOUT), traceable=traceable,
    # The Mosaic lowering of this kernel asks the chip's TPU generation (jnp.sign's rule,
    # pallas/mosaic/lowering.py _sign_lowering_rule -> tpu_info.get_tpu_info; jax 0.10.2
    # and 0.12), which a CPU host cannot answer: lowers-for-tpu names the chip, TPU v6e
    # (the first generation in the kernel's tuned block-size table).
    tpu_device_kind="TPU v6 lite",
)

RELATIONS = (page_permutation(LAYOUT), unseen_slots_ignored(LAYOUT))
