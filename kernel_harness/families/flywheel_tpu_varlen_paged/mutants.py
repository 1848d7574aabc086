"""Mutant catalog for flywheel-tpu-varlen-paged: bugs planted in flywheel-tpu's paged
varlen interface, its paged schedule and the forward pipeline's paged loads
(``kernel_harness.records.mutant``; ``kernel-harness mutate flywheel-tpu-varlen-paged``)."""

from __future__ import annotations

from kernel_harness.records.mutant import CI, Mutant, edits_of

_api = edits_of("flywheel_tpu.flash_attn_interface")
_schedule = edits_of("flywheel_tpu.pallas.loop_schedule")
_pipeline = edits_of("flywheel_tpu.pallas.fwd_pipeline")

MUTANTS: list[Mutant] = [
    _api("num-active-ignored", "the query boundaries past num_active are not pinned: the "
         "inactive sequences' junk boundaries, lengths and pages are attended into the "
         "padding rows", "jnp.arange(batch + 1, dtype=jnp.int32) <= num_active, cu_seqlens_q,",
         "jnp.arange(batch + 1, dtype=jnp.int32) <= batch, cu_seqlens_q,", tags=CI),
    _schedule("page-table-off-by-one", "a kv block's page j is looked up at table entry "
              "j + 1 (clamped into the row)",
              "table_index = jnp.minimum(kv * pages_per_block + page, pages_per_seq - 1)",
              "table_index = jnp.minimum(kv * pages_per_block + page + 1, pages_per_seq - 1)",
              tags=CI),
    _schedule("causal-top-left", "the paged sequences' queries sit at their first "
              "positions (top-left), not their last", "bottom_right_offset = kv_used_end - q_end",
              "bottom_right_offset = kv_start - q_start", tags=CI),
    _schedule("seqused-k-minus-one", "each sequence's kv length is read one short (its "
              "last key, its own token for the last query, never attended)",
              "kv_start, kv_used_end = jnp.int32(0), seqused_k_ref[seq_idx]",
              "kv_start, kv_used_end = jnp.int32(0), seqused_k_ref[seq_idx] - 1", tags=CI),
    _schedule("window-one-key-wider", "the left window's last q row of a key is one "
              "further (left + 1 keys before the diagonal seen)",
              "q_upper = k_abs - ctx.bottom_right_offset + left",
              "q_upper = k_abs - ctx.bottom_right_offset + left + 1"),
    _pipeline("kv-pair-swapped", "a merged token row's K and V are unpacked into each "
              "other's planes (the staged copy; the TPU's bitcast load is not this line)",
              "kv_pair_buf[\n                slot, tile_rows, 0, kv_part, :]",
              "kv_pair_buf[\n                slot, tile_rows, 0, 1 - kv_part, :]", tags=CI),
    _pipeline("kv-pair-of-wrong-head", "kv head h's K/V row pair is read at head "
              "2 * (h // 2): odd kv heads read their even neighbour's",
              "head_row = pl.multiple_of(2 * kv_head, 2)",
              "head_row = pl.multiple_of(2 * (kv_head // 2 * 2), 2)"),
    _pipeline("gqa-group-reads-wrong-q-heads", "kv head g's group stages q heads from "
              "g * head_fold, not g * gqa_fold: its own output rows hold other heads' "
              "attention", "base_head = group * group_heads", "base_head = group * head_fold"),
]
