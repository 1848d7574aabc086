"""Mutant catalog for flywheel-tpu-ragged-append: bugs planted in flywheel-tpu's append
source (``kernel_harness.records.mutant``; ``kernel-harness mutate``)."""

from __future__ import annotations

from kernel_harness.families.flywheel_tpu_ragged_append.kernel import MODULE
from kernel_harness.records.mutant import CI, Mutant, edits_of

_m = edits_of(MODULE)

MUTANTS: list[Mutant] = [
    _m("kv-swapped", "each row pair gets V in the K row and K in the V row",
       "k_bits | (v_bits << 16)", "v_bits | (k_bits << 16)", tags=CI),
    _m("inactive-appended", "every sequence slot is appended, not only the active ones",
       "lax.fori_loop(0, num_active_ref[0], _append_request, None)",
       "lax.fori_loop(0, cu_seqlens_ref.shape[0] - 1, _append_request, None)", tags=CI),
    _m("first-partial-page-skipped", "the write starts at the first page boundary after "
       "the cached tokens (a partly filled page gets nothing)",
       "first_page = prefix_len // page_size", "first_page = pl.cdiv(prefix_len, page_size)"),
    _m("logical-page-as-physical", "the page table is indexed without the sequence's row",
       "block_table_ref[request * pages_per_seq + logical_page]",
       "block_table_ref[logical_page]"),
    _m("source-row-unshifted", "each sequence's new tokens are read from row 0 of k and v",
       "source_start = query_start + first_token - prefix_len",
       "source_start = first_token - prefix_len"),
    _m("page-end-one-short", "a page's run stops one token before the page end",
       "(logical_page + 1) * page_size,\n        )",
       "(logical_page + 1) * page_size - 1,\n        )"),
]
