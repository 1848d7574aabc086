"""Mutant catalog for splash: realistic bugs planted in the installed splash kernel source.

``kernel-harness mutate splash`` loads each mutated copy in place of the upstream
module and runs the splash properties; every mutant must be killed. A mutant
whose text is no longer in the installed source is an ERROR (jax changed the
kernel: update the text here). ``ci`` marks the subset CI runs.
"""

from __future__ import annotations

from kernel_harness.records.mutant import CI, Mutant, edits_of

_kernel = edits_of("jax.experimental.pallas.ops.tpu.splash_attention.splash_attention_kernel")
_masks = edits_of("jax.experimental.pallas.ops.tpu.splash_attention.splash_attention_mask")

#: The segment-id arguments of ``_apply_mask_and_soft_cap``: 1 forward, 2 dq, 3 dkv.
_SEGMENT_ARGS = (
    "        q_segment_ids_ref,\n"
    "        kv_segment_ids_ref,\n"
    "        attn_logits_soft_cap=attn_logits_soft_cap,\n"
)
_NO_SEGMENTS = _SEGMENT_ARGS.replace("q_segment_ids_ref,", "None,")


def _segments_dropped(name: str, occurrence: int, where: str) -> Mutant:
    return _kernel(name, f"segment ids ignored in the {where} only", _SEGMENT_ARGS,
                   _NO_SEGMENTS, occurrence=occurrence)


MUTANTS: list[Mutant] = [
    _kernel("fwd-acc-not-rescaled",
            "forward: the output accumulator is not rescaled by exp(m_prev - m_next) "
            "when a later kv block raises the running max",
            "o_scratch_ref[:] = alpha_o * o_scratch_ref[:] + o_curr",
            "o_scratch_ref[:] = o_scratch_ref[:] + o_curr", tags=CI),
    _kernel("fwd-l-not-rescaled",
            "forward: the running softmax denominator is not rescaled between kv blocks",
            "l_next = l_curr + alpha * l_prev", "l_next = l_curr + l_prev"),
    _kernel("fwd-pv-in-bf16",
            "forward: the PV product runs with bfloat16 operands (precision loss in "
            "the output accumulator for float32 inputs)",
            "    v = v.astype(float32)\n    o_curr = lax.dot_general(s_curr, v, sv_dims)",
            "    v = v.astype(jnp.bfloat16)\n    o_curr = lax.dot_general(\n"
            "        s_curr.astype(jnp.bfloat16), v, sv_dims, preferred_element_type=float32)",
            tags=CI),
    _segments_dropped("fwd-ignores-segments", 1, "forward kernel"),
    _segments_dropped("dq-ignores-segments", 2, "dq kernel"),
    _segments_dropped("dkv-ignores-segments", 3, "dkv kernel"),
    _kernel("fwd-compute-block-offset",
            "forward: the in-kernel mask forgets the compute sub-block offset (only "
            "wrong when block_kv_compute < block_kv)",
            "k_offset=global_kv_index * bkv + kv_compute_index * bkv_compute,",
            "k_offset=global_kv_index * bkv,"),
    _kernel("dkv-compute-block-offset",
            "dkv: the in-kernel mask forgets the compute sub-block offset",
            "k_offset=kv_index * bkv + i * bkv_compute,", "k_offset=kv_index * bkv,"),
    _masks("local-left-edge-off-by-one",
           "LocalMask: the left window edge is exclusive instead of inclusive",
           "mask = shifted_q_ids - left_size <= kv_ids",
           "mask = shifted_q_ids - left_size < kv_ids"),
    _masks("causal-offset-off-by-one",
           "CausalMask with an offset: the shifted diagonal is excluded",
           "return q_ids + self.offset >= kv_ids", "return q_ids + self.offset > kv_ids"),
    _kernel("partial-mask-blocks-ignored",
            "partial mask blocks are treated as fully unmasked (numpy masks)",
            # (the broadcast alone: jax 0.12.1 splits the bitwise_or over lines)
            "jnp.broadcast_to(should_not_mask, mask.shape)",
            "jnp.broadcast_to(True, mask.shape)"),
    _kernel("dq-soft-cap-grad", "dq kernel: the soft-cap derivative uses (1 - tanh) instead of "
            "(1 - tanh^2)", "      g = ds * (1 - d)\n      ds = g + g * d\n",
            "      g = ds * (1 - d)\n      ds = g\n", occurrence=1),
    _kernel("dsinks-wrong-sign", "the sink gradient has the wrong sign",
            "    sinks_exp = -jnp.exp(sinks[..., None, None].astype(jnp.float32)",
            "    sinks_exp = jnp.exp(sinks[..., None, None].astype(jnp.float32)",
            occurrence=2),  # the first is splash's own reference backward
    _kernel("sinks-left-out-of-denominator",
            "forward: the sink's probability mass is left out of the softmax denominator",
            "      l_scratch_ref[...] = jnp.ones_like(l_scratch_ref)",
            "      l_scratch_ref[...] = jnp.zeros_like(l_scratch_ref)"),
    _kernel("lse-missing-max",
            "the saved logsumexp drops the running max (log l instead of m + log l)",
            "logsumexp_ref[...] = (jnp.log(l) + m_scratch_ref[...]).astype(",
            "logsumexp_ref[...] = (jnp.log(l)).astype("),
    _kernel("bwd-delta-dropped",
            "backward: the delta term rowsum(o * do) is left out (ds = p * dp)",
            'di = jnp.einsum("hsd,hsd->hs", o.astype(jnp.float32), do.astype(jnp.float32))',
            "di = jnp.zeros(o.shape[:-1], jnp.float32)"),
    _kernel("dq-written-at-first-kv-step",
            "dq kernel: dq is written back after the first kv block instead of the last",
            "  @pl.when(j == grid_width - 1)\n  def end():\n    dq_ref[...]",
            "  @pl.when(j == 0)\n  def end():\n    dq_ref[...]"),
    _kernel("dkv-written-at-first-q-step",
            "dkv kernel: dk/dv are written back after the first q block, not the last",
            "should_write = q_index == grid_width - 1", "should_write = q_index == 0"),
    _kernel("fwd-gqa-head-map", "forward: query head h reads key head h % kv_heads instead of "
            "h // (q_heads / kv_heads)",
            "prefix = () if is_mqa else (_div(h, q_heads_per_kv_head),)",
            "prefix = () if is_mqa else (lax.rem(h, num_kv_heads),)", occurrence=1),
    _kernel("dkv-gqa-written-after-first-head",
            "dkv kernel, grouped heads: dk/dv are written after the group's first "
            "query head instead of its last",
            "should_write, q_head_index_per_kv_head == q_heads_per_kv_heads - 1",
            "should_write, q_head_index_per_kv_head == 0"),
]
