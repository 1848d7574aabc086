"""gpu-paged's layout mapping onto the paged-decode op and its metamorphic hooks."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from kernel_harness.core.case import Arrays
from kernel_harness.families.gpu_paged.cases import PagedCase
from kernel_harness.ops.paged_decode.layout import (
    PagedLayout,
    finite_pages,
    repeat_heads,
    unseen_past_lengths,
)
from kernel_harness.ops.paged_decode.relations import (
    compute_block_invariance,
    page_permutation,
    unseen_slots_ignored,
)
from kernel_harness.spec.hooks import Metamorphic

#: Inputs indexed by physical page (axis 1) and by kv head (axis 0).
_PAGED = ("k_pages", "v_pages", "k_scales_pages", "v_scales_pages")

LAYOUT = PagedLayout(
    pages=dict.fromkeys(_PAGED, 1), table="block_tables",
    unseen=lambda case, inputs: unseen_past_lengths(
        inputs["block_tables"], case.total_pages, case.page_size,
        [case.length(b) for b in range(case.batch)]),
)


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


def as_mha(case: PagedCase, inputs: Arrays) -> tuple[PagedCase, Arrays] | None:
    """The same problem with each kv head repeated for every query head of its group."""
    if case.group == 1:
        return None
    mha = dataclasses.replace(case, kv_heads=case.q_heads)
    return mha, repeat_heads(inputs, dict.fromkeys(_PAGED, 0), case.group)


def excluded(case: PagedCase) -> dict[str, Any]:
    """float16 rows of length 0 are outside the contract (the kernel may give NaN)."""
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
