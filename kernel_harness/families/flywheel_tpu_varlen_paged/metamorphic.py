"""flywheel-tpu-varlen-paged's layout on the paged op (one merged cache, page axis 0, K
and V of kv head h in rows 2h and 2h + 1) and its metamorphic hooks."""

from __future__ import annotations

import dataclasses

from hypothesis import strategies as st

from kernel_harness.families.flywheel_tpu import merged_cache
from kernel_harness.families.flywheel_tpu_varlen_paged import kernel as _kernel
from kernel_harness.families.flywheel_tpu_varlen_paged.cases import (
    BLOCKS,
    FlywheelVarlenPagedCase,
)
from kernel_harness.ops.paged_attention.layout import (
    PagedLayout,
    finite_pages,
    unseen_past_lengths,
)
from kernel_harness.ops.paged_attention.relations import page_permutation, unseen_slots_ignored
from kernel_harness.records.hooks import Metamorphic

#: The active sequences' rows of the table reach their kv_lens tokens; every other slot
#: (past a length, inactive sequences' pages, the spare page) is unseen.
LAYOUT = PagedLayout(
    pages={"kv_cache": 0}, table="block_table",
    unseen=lambda case, inputs: unseen_past_lengths(
        inputs["block_table"], case.total_pages, case.page_size, case.kv_lens))


def block_variants(case: FlywheelVarlenPagedCase) -> st.SearchStrategy[FlywheelVarlenPagedCase]:
    """The case with the library's tiles pinned otherwise (``block_sizes``; the same
    inputs)."""
    return st.sampled_from([dataclasses.replace(case, blocks=b)
                            for b in (None, *BLOCKS) if b != case.blocks])


METAMORPHIC = Metamorphic(
    roles={"q": ("head", None, "dim"), "kv_cache": (None, None, None, "dim"),
           "out": ("head", None, "dim")},
    as_mha=merged_cache.as_mha, block_variants=block_variants, logit_input="q",
    traceable=_kernel.traceable, constrain=finite_pages(LAYOUT),
    tpu_device_kind="TPU v6 lite")

RELATIONS = (page_permutation(LAYOUT), unseen_slots_ignored(LAYOUT))
