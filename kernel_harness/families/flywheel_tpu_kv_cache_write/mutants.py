"""Mutant catalog for flywheel-tpu-kv-cache-write: bugs planted in flywheel-tpu's writer
source (``kernel_harness.records.mutant``; ``kernel-harness mutate``)."""

from __future__ import annotations

from kernel_harness.families.flywheel_tpu_kv_cache_write.kernel import MODULE
from kernel_harness.records.mutant import CI, Mutant, edits_of

_m = edits_of(MODULE)

MUTANTS: list[Mutant] = [
    _m("kv-swapped", "each row pair gets V in the K row and K in the V row",
       "k_bits | (v_bits << 16)", "v_bits | (k_bits << 16)", tags=CI),
    _m("junk-columns-live", "columns past num_slices are read as live pieces",
       "lax.select(is_live, slices_ref[field, slice_index], 0)",
       "slices_ref[field, slice_index]", tags=CI),
    _m("partial-interleave-step-dropped",
       "a piece's last partial interleave step is skipped (rows past the last whole step "
       "go out as whatever the staging held)",
       "pl.cdiv(length, step_rows), _interleave_step",
       "length // step_rows, _interleave_step"),
    _m("cache-not-aliased", "the output does not alias the cache: every row the writer "
       "does not write is garbage", "input_output_aliases={4: 0}", "input_output_aliases={}"),
    _m("one-block-only", "the grid drops a last partial block of pieces",
       "grid=(pl.cdiv(num_slices[0], pieces_per_block),)",
       "grid=(num_slices[0] // pieces_per_block,)"),
    _m("block-offset-missing", "every writer program stages the first block's pieces",
       "first_piece = pl.program_id(0) * pieces_per_block", "first_piece = 0 * pieces_per_block"),
    _m("write-one-row-late", "each piece lands one cache row after its start",
       "out_hbm.at[pl.ds(cache_row_start, length)]",
       "out_hbm.at[pl.ds(cache_row_start + 1, length)]"),
]
