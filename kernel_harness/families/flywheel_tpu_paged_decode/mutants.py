"""Mutant catalog for flywheel-tpu-paged-decode: bugs planted in flywheel-tpu's decode
source, the interface's q scaling and the paged decode kernel
(``kernel_harness.records.mutant``; ``kernel-harness mutate flywheel-tpu-paged-decode``)."""

from __future__ import annotations

from kernel_harness.records.mutant import CI, Mutant, edits_of

_api = edits_of("flywheel_tpu.flash_attn_interface")
_kernel = edits_of("flywheel_tpu.pallas.flash_fwd_kvcache")

MUTANTS: list[Mutant] = [
    _api("scale-without-log2e", "the fused q scale leaves out log2(e): natural-log logits "
         "reach the kernel's exp2 (a softmax at the wrong temperature)",
         "return softmax_scale * LOG2E", "return softmax_scale", tags=CI),
    _kernel("length-mask-inclusive", "the length mask keeps the slot at index == "
            "cache_seqlens (one masked slot past the row's end is attended)",
            "is_in_window = key_position < total_len",
            "is_in_window = key_position <= total_len", tags=CI),
    _kernel("window-one-key-short", "the left window starts one key late (left keys "
            "counting the query's own, not left + 1)",
            "first_key = jnp.maximum(0, total_len - 1 - left)",
            "first_key = jnp.maximum(0, total_len - left)", tags=CI),
    _kernel("block-reads-its-first-page", "every page of a multi-page kv block is loaded "
            "from the block's first table entry", "block_table_ref[table_base + page],",
            "block_table_ref[table_base],", tags=CI),
    _kernel("softcap-without-log2e", "the soft cap's tanh is scaled by softcap, not "
            "softcap * log2(e), before the base-2 softmax",
            "log2_softcap=softcap * LOG2E,", "log2_softcap=softcap,"),
    _kernel("empty-row-unguarded", "the final 1 / row_sum is taken for a row with no key "
            "too (0 * inf: NaN where the library returns 0)",
            "row_sum > 0, pl.reciprocal(row_sum, approx=True), 0.0",
            "row_sum >= 0, pl.reciprocal(row_sum, approx=True), 0.0", tags=CI),
    _kernel("kv-pair-rows-unstrided", "a merged token row's K/V pair of kv head h is read "
            "at rows h and h + 1, not 2h and 2h + 1 (the [k0, v0, k1, v1, ...] order lost)",
            "pl.ds(2 * kv_head + kv_part, 1),", "pl.ds(kv_head + kv_part, 1),"),
]
