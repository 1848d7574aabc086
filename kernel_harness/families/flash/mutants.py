"""Mutant catalog for flash: realistic bugs planted in the installed TPU flash kernel source.

``kernel-harness mutate flash`` loads each mutated copy of
``jax.experimental.pallas.ops.tpu.flash_attention`` in place of the original and
runs the flash properties; every mutant must be killed. The mask, rescale,
sub-tile offset, scale, segment and bias edits are also the flash family's own tests'
planted source bugs (``tests/families/flash/test_flash_planted_bugs.py`` loads them with
:func:`kernel_harness.records.mutant.load_patched`). Occurrences follow the file's order:
forward (tiled), forward (single step), dkv, dq.
"""

from __future__ import annotations

from kernel_harness.records.mutant import CI, Mutant, edits_of

KERNEL = "jax.experimental.pallas.ops.tpu.flash_attention"

_CAUSAL = ("causal_mask = col_ids <= row_ids", "causal_mask = col_ids < row_ids")
_SEGMENTS = ("jnp.equal(q_segment_ids, kv_segment_ids)",
             "jnp.equal(q_segment_ids, q_segment_ids)")


_m = edits_of(KERNEL)


MUTANTS: list[Mutant] = [
    _m("fwd-causal-off-by-one", "forward (tiled): the causal mask drops the diagonal",
       *_CAUSAL, occurrence=1, tags=CI),
    _m("fwd-single-step-causal-off-by-one",
       "forward (one kv step): the causal mask drops the diagonal", *_CAUSAL, occurrence=2),
    _m("dkv-causal-off-by-one", "dkv: the causal mask drops the diagonal", *_CAUSAL,
       occurrence=3, tags=CI),
    _m("dq-causal-off-by-one", "dq: the causal mask drops the diagonal", *_CAUSAL,
       occurrence=4),
    _m("fwd-l-not-rescaled", "forward: the running denominator is not rescaled between kv "
       "blocks", "l_corr = alpha * l_prev", "l_corr = l_prev"),
    _m("fwd-acc-not-rescaled", "forward: the output accumulator is not rescaled between kv "
       "blocks", "*= l_broadcast(l_corr * l_next_inv_safe)",
       "*= l_broadcast(l_prev * l_next_inv_safe)", tags=CI),
    _m("fwd-pv-in-bf16", "forward: the PV product runs with bfloat16 operands (precision loss "
       "for float32 inputs)",
       "      o_curr = jax.lax.dot(\n          p.astype(v.dtype), v,",
       "      o_curr = jax.lax.dot(\n          p.astype(jnp.bfloat16), v.astype(jnp.bfloat16),"),
    _m("fwd-subtile-col-offset", "forward: the causal mask forgets the kv sub-tile offset",
       "col_ids += kv_seq_idx * block_k_major + start_k",
       "col_ids += kv_seq_idx * block_k_major"),
    _m("dkv-subtile-row-offset", "dkv: the causal mask forgets the q sub-tile offset",
       "row_ids += q_seq_index * block_q_major + start_q",
       "row_ids += q_seq_index * block_q_major"),
    _m("dq-subtile-col-offset", "dq: the causal mask forgets the kv sub-tile offset",
       "col_ids += kv_seq_index * block_k_major + i * block_k",
       "col_ids += kv_seq_index * block_k_major"),
    _m("causal-block-skip-drops-diagonal",
       "causal block skipping also skips blocks that only touch the diagonal",
       "return ((r + 1) * r_blk_size - 1) > (c * c_blk_size)",
       "return ((r + 1) * r_blk_size - 1) > ((c + 1) * c_blk_size - 1)"),
    _m("dkv-missing-sm-scale", "dk misses sm_scale", "        ds = ds * sm_scale",
       "        ds = ds"),
    _m("dq-missing-sm-scale", "dq misses sm_scale",
       "      ds = ds * sm_scale\n\n    if ds_tile_ref", "      ds = ds\n\n    if ds_tile_ref"),
    _m("fwd-ignores-segments", "forward (tiled): segment ids ignored", *_SEGMENTS,
       occurrence=1),
    _m("dkv-ignores-segments", "dkv: segment ids ignored", *_SEGMENTS, occurrence=3),
    _m("dq-ignores-segments", "dq: segment ids ignored", *_SEGMENTS, occurrence=4),
    _m("dkv-no-bias", "dkv: the attention bias is left out of the recomputed logits",
       "capped_logits += ab", "capped_logits = capped_logits", occurrence=1),
    _m("dq-no-bias", "dq: the attention bias is left out of the recomputed logits",
       "capped_logits += ab", "capped_logits = capped_logits", occurrence=2),
    _m("fwd-block-b-first-only", "forward: every example of a batch block uses example 0",
       "kernel((batch_idx, 0), q_tile_ref", "kernel((0, 0), q_tile_ref"),
    _m("fwd-single-step-no-bias", "forward (one kv step): the attention bias is not added",
       "s += ab_tile_ref[batch_idx].astype(jnp.float32)", "pass"),
    _m("fwd-ragged-q-block-dropped", "forward: the grid drops a ragged last q block (its rows "
       "are never written)", "pl.cdiv(q_seq_len, block_q),", "q_seq_len // block_q,"),
    _m("fwd-partial-batch-block-dropped", "forward: the grid drops a partial last batch block",
       "pl.cdiv(batch_size, block_b)", "batch_size // block_b"),
    _m("fwd-stored-at-first-kv-step", "forward: the output is written after the first kv "
       "block, not the last", "@pl.when(kv_seq_idx == (kv_seq_len // block_k_major) - 1)",
       "@pl.when(kv_seq_idx == 0)"),
    _m("dkv-stored-at-first-q-step", "dkv: dk/dv are written after the first q block",
       "@pl.when(q_seq_index == q_seq_len // block_q_major - 1)",
       "@pl.when(q_seq_index == 0)"),
    _m("dq-stored-at-first-kv-step", "dq: dq is written after the first kv block",
       "@pl.when(kv_seq_index == kv_seq_len // block_k_major - 1)",
       "@pl.when(kv_seq_index == 0)"),
    _m("fwd-kv-head-0", "forward: every head reads the key/value of head 0",
       "    return (batch_index, head_index, next_kv_index, 0)",
       "    return (batch_index, 0, next_kv_index, 0)", occurrence=1),
]
