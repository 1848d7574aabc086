"""gpu-paged's layout mapping onto the paged-decode op and its metamorphic hooks."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from kernel_harness.families.gpu_paged.cases import PagedCase
from kernel_harness.ops.paged_attention.layout import finite_pages, head_major
from kernel_harness.ops.paged_attention.relations import (
    compute_block_invariance,
    page_permutation,
    unseen_slots_ignored,
)
from kernel_harness.records.hooks import Metamorphic

#: Inputs indexed by physical page (axis 1) and by kv head (axis 0).
_PAGED = ("k_pages", "v_pages", "k_scales_pages", "v_scales_pages")

LAYOUT, as_mha = head_major("block_tables", _PAGED,
                            lambda case: [case.length(b) for b in range(case.batch)])


def block_variants(case: PagedCase) -> list[PagedCase]:
    """The case with every other valid pages_per_compute_block and k_splits."""
    out = []
    for pages in (1, 2, 4, 8):
        for splits in (1, 2, 4):
            if (pages, splits) == (case.pages_per_compute_block, case.k_splits):
                continue
            try:
                out.append(dataclasses.replace(case, pages_per_compute_block=pages,
                                               k_splits=splits))
            except ValueError:
                continue  # not a valid tiling of this case
    return out


def excluded(case: PagedCase) -> dict[str, Any]:
    """float16 rows of length 0 are outside the contract (the kernel may give NaN; see the
    family's CONTRACT); all else counts."""
    if case.dtype != "float16" or case.lengths is None or 0 not in case.lengths:
        return {}
    return {"out": (np.asarray(case.lengths) == 0)[:, None, None]}


METAMORPHIC = Metamorphic(
    roles={"q": ("batch", "head", "dim"), "k_pages": ("kv_head", None, None, "dim"),
           "v_pages": ("kv_head", None, None, "dim"),
           "k_scales_pages": ("kv_head", None, None), "v_scales_pages": ("kv_head", None, None),
           "out": ("batch", "head", "dim")},
    as_mha=as_mha, logit_input="q", may_be_nonfinite=excluded, constrain=finite_pages(LAYOUT),
)

RELATIONS = (page_permutation(LAYOUT), unseen_slots_ignored(LAYOUT),
             compute_block_invariance(LAYOUT, block_variants))
