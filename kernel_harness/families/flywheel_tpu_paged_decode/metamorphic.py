"""flywheel-tpu-paged-decode's layout on the paged op (one merged cache, page axis 0,
K and V of kv head h in rows 2h and 2h + 1) and its metamorphic hooks."""

from __future__ import annotations

from kernel_harness.families.flywheel_tpu import merged_cache
from kernel_harness.families.flywheel_tpu_paged_decode import kernel as _kernel
from kernel_harness.ops.paged_attention.layout import (
    PagedLayout,
    finite_pages,
    unseen_past_lengths,
)
from kernel_harness.ops.paged_attention.relations import page_permutation, unseen_slots_ignored
from kernel_harness.records.hooks import Metamorphic

LAYOUT = PagedLayout(
    pages={"kv_cache": 0}, table="block_table",
    unseen=lambda case, inputs: unseen_past_lengths(
        inputs["block_table"], case.total_pages, case.page_size, case.lengths))


METAMORPHIC = Metamorphic(
    roles={"q": ("batch", "head", "dim"), "kv_cache": (None, None, None, "dim"),
           "out": ("batch", "head", "dim")},
    as_mha=merged_cache.as_mha, logit_input="q", traceable=_kernel.traceable,
    constrain=finite_pages(LAYOUT), tpu_device_kind="TPU v6 lite")

RELATIONS = (page_permutation(LAYOUT), unseen_slots_ignored(LAYOUT))
