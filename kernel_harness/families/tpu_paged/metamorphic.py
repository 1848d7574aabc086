"""tpu-paged's layout mapping onto the paged-decode op and its metamorphic hooks."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from kernel_harness.families.tpu_paged import kernel as _kernel
from kernel_harness.families.tpu_paged.cases import TpuPagedCase
from kernel_harness.ops.paged_attention.layout import finite_pages, head_major
from kernel_harness.ops.paged_attention.relations import (
    compute_block_invariance,
    page_permutation,
    unseen_slots_ignored,
)
from kernel_harness.records.hooks import Metamorphic

#: Inputs indexed by physical page (axis 1) and by kv head (axis 0).
_PAGED = ("k_pages", "v_pages", "k_scales", "v_scales")

LAYOUT, as_mha = head_major("page_indices", _PAGED, lambda case: case.lengths)


def block_variants(case: TpuPagedCase) -> list[TpuPagedCase]:
    """The case with every other pages_per_compute_block that divides pages_per_seq."""
    return [dataclasses.replace(case, pages_per_compute_block=p)
            for p in range(1, case.pages_per_seq + 1)
            if case.pages_per_seq % p == 0 and p != case.pages_per_compute_block]


def excluded(case: TpuPagedCase) -> dict[str, Any]:
    """Length-0 rows are outside the contract with inline_seq_dim=False (never written:
    they may hold anything, NaN included)."""
    if case.inline_seq_dim or 0 not in case.lengths:
        return {}
    return {"out": (np.asarray(case.lengths) == 0)[:, None, None]}


METAMORPHIC = Metamorphic(
    roles={"q": ("batch", "head", "dim"), "k_pages": ("kv_head", None, None, "dim"),
           "v_pages": ("kv_head", None, None, "dim"), "k_scales": ("kv_head", None, None, None),
           "v_scales": ("kv_head", None, None, None), "out": ("batch", "head", "dim")},
    as_mha=as_mha, logit_input="q", may_be_nonfinite=excluded, traceable=_kernel.traceable,
    constrain=finite_pages(LAYOUT),
)

RELATIONS = (page_permutation(LAYOUT), unseen_slots_ignored(LAYOUT),
             compute_block_invariance(LAYOUT, block_variants))
