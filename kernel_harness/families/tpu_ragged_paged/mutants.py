"""Mutant catalog for tpu-ragged-paged: realistic bugs planted in the installed
``jax.experimental.pallas.ops.tpu.ragged_paged_attention.kernel``.

``kernel-harness mutate tpu-ragged-paged`` loads each mutated copy in place of the
original and runs the family's properties; every mutant must be killed. They cover the
causal and window masks, the soft cap and scale, the online-softmax rescale and its
per-sequence reset, page and kv-block bounds, the kv-length mask against NaN in the
cache, the row offset of a query block, the store mask, the next-sequence prefetch, the
GQA head mapping and the K/V interleaving of the combined heads.
"""

from __future__ import annotations

from kernel_harness.records.mutant import CI, Mutant, edits_of

RPA = "jax.experimental.pallas.ops.tpu.ragged_paged_attention.kernel"


_m = edits_of(RPA)


MUTANTS: list[Mutant] = [
    _m("causal-mask-drops-diagonal", "the causal mask hides a query's own key",
       "causal_mask = row_ids < col_ids", "causal_mask = row_ids <= col_ids", tags=CI),
    _m("window-one-key-wider", "off by one at the sliding window's far edge",
       "row_ids - sliding_window >= col_ids", "row_ids - sliding_window > col_ids",
       tags=CI),
    _m("soft-cap-not-divided", "tanh of the raw logits: soft_cap * tanh(qk)",
       "qk = soft_cap * jnp.tanh(qk / soft_cap)", "qk = soft_cap * jnp.tanh(qk)"),
    _m("scale-applied-twice", "the logits are scaled by sm_scale twice",
       "          * sm_scale\n", "          * sm_scale * sm_scale\n"),
    _m("missing-rescale", "the running sum is not rescaled when the running max grows",
       "l_alpha = alpha * l_prev", "l_alpha = l_prev", tags=CI),
    _m("state-not-reset-per-seq",
       "m, l and the accumulator are never re-initialized at a sequence's first kv block",
       "kv_blk_idx == 0, jnp.full_like(ref, init_val), ref[...]",
       "kv_blk_idx < 0, jnp.full_like(ref, init_val), ref[...]"),
    _m("partial-page-not-fetched",
       "the last page of a sequence is rounded down: a partial last page is never fetched",
       "pl.cdiv(kv_lens_ref[seq_idx], page_size)", "kv_lens_ref[seq_idx] // page_size",
       tags=CI),
    _m("kv-block-start-in-pages", "a kv block's first key counted in pages, not tokens",
       "kv_len_start = kv_blk_idx * num_kv_per_blk",
       "kv_len_start = kv_blk_idx * num_kv_pages_per_blk", tags=CI),
    _m("kv-len-mask-dropped",
       "K is not zeroed past kv_len: NaN in unowned cache slots reaches the logits",
       "k = jnp.where(kv_mask, k.astype(jnp.float32), 0).astype(k.dtype)",
       "k = k.astype(k.dtype)"),
    _m("row-position-ignores-q-block",
       "a query's position is computed as if its query block started at row 0",
       "          + q_len_start\n          - q_start\n", "          - q_start\n"),
    _m("store-drops-first-row", "the store mask drops each sequence's first row in a block",
       "mask=jnp.logical_and(iota >= start, iota < end)",
       "mask=jnp.logical_and(iota > start, iota < end)"),
    _m("prefetch-next-seq-off-by-one",
       "a sequence ending exactly at a query block's end is not seen as ended by the "
       "prefetch: the next block's K/V come from the wrong sequence",
       "is_cur_seq_end_in_cur_q_blk = q_end <= q_len_end",
       "is_cur_seq_end_in_cur_q_blk = q_end < q_len_end"),
    _m("gqa-head-mapping", "query heads of kv head h start at h instead of h * group",
       "q_head_idx = kv_head_idx * num_q_heads_per_kv_head",
       "q_head_idx = kv_head_idx", tags=CI),
    _m("k-v-swapped", "K and V are read from each other's combined head slots (32-bit)",
       "return [ref[start::step, :]], [ref[start + 1 :: step, :]]",
       "return [ref[start + 1 :: step, :]], [ref[start::step, :]]"),
    _m("k-v-swapped-bf16", "bfloat16: K taken from the high and V from the low half-words",
       "bk = b << 16\n      bv = b & jnp.uint32(0xFFFF0000)",
       "bv = b << 16\n      bk = b & jnp.uint32(0xFFFF0000)"),
]
