"""Mutant catalog for splash: realistic bugs planted in the installed splash kernel source.

``kernel-harness mutate splash`` loads each mutated copy in place of the upstream
module and runs the splash properties; every mutant must be killed. A mutant
whose text is no longer in the installed source is an ERROR (jax changed the
kernel: update the text here). ``ci`` marks the subset CI runs.
"""

from __future__ import annotations

from kernel_harness.spec.mutant import Mutant

KERNEL = "jax.experimental.pallas.ops.tpu.splash_attention.splash_attention_kernel"
MASKS = "jax.experimental.pallas.ops.tpu.splash_attention.splash_attention_mask"

#: The segment-id arguments of ``_apply_mask_and_soft_cap``: 1 forward, 2 dq, 3 dkv.
_SEGMENT_ARGS = (
    "        q_segment_ids_ref,\n"
    "        kv_segment_ids_ref,\n"
    "        attn_logits_soft_cap=attn_logits_soft_cap,\n"
)
_NO_SEGMENTS = _SEGMENT_ARGS.replace("q_segment_ids_ref,", "None,")


def _segments_dropped(name: str, occurrence: int, where: str) -> Mutant:
    return Mutant(
        name=name, description=f"segment ids ignored in the {where} only", module=KERNEL,
        old=_SEGMENT_ARGS, new=_NO_SEGMENTS, occurrence=occurrence,
    )


MUTANTS: list[Mutant] = [
    Mutant(
        name="fwd-acc-not-rescaled",
        description="forward: the output accumulator is not rescaled by exp(m_prev - m_next) "
        "when a later kv block raises the running max",
        module=KERNEL,
        old="o_scratch_ref[:] = alpha_o * o_scratch_ref[:] + o_curr",
        new="o_scratch_ref[:] = o_scratch_ref[:] + o_curr",
        tags=("ci",),
    ),
    Mutant(
        name="fwd-l-not-rescaled",
        description="forward: the running softmax denominator is not rescaled between kv blocks",
        module=KERNEL,
        old="l_next = l_curr + alpha * l_prev",
        new="l_next = l_curr + l_prev",
    ),
    Mutant(
        name="fwd-pv-in-bf16",
        description="forward: the PV product runs with bfloat16 operands (precision loss in "
        "the output accumulator for float32 inputs)",
        module=KERNEL,
        old="    v = v.astype(float32)\n    o_curr = lax.dot_general(s_curr, v, sv_dims)",
        new="    v = v.astype(jnp.bfloat16)\n    o_curr = lax.dot_general(\n"
        "        s_curr.astype(jnp.bfloat16), v, sv_dims, preferred_element_type=float32)",
        tags=("ci",),
    ),
    _segments_dropped("fwd-ignores-segments", 1, "forward kernel"),
    _segments_dropped("dq-ignores-segments", 2, "dq kernel"),
    _segments_dropped("dkv-ignores-segments", 3, "dkv kernel"),
    Mutant(
        name="fwd-compute-block-offset",
        description="forward: the in-kernel mask forgets the compute sub-block offset (only "
        "wrong when block_kv_compute < block_kv)",
        module=KERNEL,
        old="k_offset=global_kv_index * bkv + kv_compute_index * bkv_compute,",
        new="k_offset=global_kv_index * bkv,",
    ),
    Mutant(
        name="dkv-compute-block-offset",
        description="dkv: the in-kernel mask forgets the compute sub-block offset",
        module=KERNEL,
        old="k_offset=kv_index * bkv + i * bkv_compute,",
        new="k_offset=kv_index * bkv,",
    ),
    Mutant(
        name="local-left-edge-off-by-one",
        description="LocalMask: the left window edge is exclusive instead of inclusive",
        module=MASKS,
        old="mask = shifted_q_ids - left_size <= kv_ids",
        new="mask = shifted_q_ids - left_size < kv_ids",
    ),
    Mutant(
        name="causal-offset-off-by-one",
        description="CausalMask with an offset: the shifted diagonal is excluded",
        module=MASKS,
        old="return q_ids + self.offset >= kv_ids",
        new="return q_ids + self.offset > kv_ids",
    ),
    Mutant(
        name="partial-mask-blocks-ignored",
        description="partial mask blocks are treated as fully unmasked (numpy masks)",
        module=KERNEL,
        old="jnp.bitwise_or(mask, jnp.broadcast_to(should_not_mask, mask.shape))",
        new="jnp.bitwise_or(mask, jnp.broadcast_to(True, mask.shape))",
    ),
    Mutant(
        name="dq-soft-cap-grad",
        description="dq kernel: the soft-cap derivative uses (1 - tanh) instead of "
        "(1 - tanh^2)",
        module=KERNEL,
        old="      g = ds * (1 - d)\n      ds = g + g * d\n",
        new="      g = ds * (1 - d)\n      ds = g\n",
        occurrence=1,
    ),
    Mutant(
        name="dsinks-wrong-sign",
        description="the sink gradient has the wrong sign",
        module=KERNEL,
        old="    sinks_exp = -jnp.exp(sinks[..., None, None].astype(jnp.float32)",
        new="    sinks_exp = jnp.exp(sinks[..., None, None].astype(jnp.float32)",
        occurrence=2,  # the first is splash's own reference backward
    ),
    Mutant(
        name="sinks-left-out-of-denominator",
        description="forward: the sink's probability mass is left out of the softmax "
        "denominator",
        module=KERNEL,
        old="      l_scratch_ref[...] = jnp.ones_like(l_scratch_ref)",
        new="      l_scratch_ref[...] = jnp.zeros_like(l_scratch_ref)",
    ),
    Mutant(
        name="lse-missing-max",
        description="the saved logsumexp drops the running max (log l instead of m + log l)",
        module=KERNEL,
        old="logsumexp_ref[...] = (jnp.log(l) + m_scratch_ref[...]).astype(",
        new="logsumexp_ref[...] = (jnp.log(l)).astype(",
    ),
    Mutant(
        name="bwd-delta-dropped",
        description="backward: the delta term rowsum(o * do) is left out (ds = p * dp)",
        module=KERNEL,
        old='di = jnp.einsum("hsd,hsd->hs", o.astype(jnp.float32), do.astype(jnp.float32))',
        new="di = jnp.zeros(o.shape[:-1], jnp.float32)",
    ),
    Mutant(
        name="dq-written-at-first-kv-step",
        description="dq kernel: dq is written back after the first kv block instead of the last",
        module=KERNEL,
        old="  @pl.when(j == grid_width - 1)\n  def end():\n    dq_ref[...]",
        new="  @pl.when(j == 0)\n  def end():\n    dq_ref[...]",
    ),
    Mutant(
        name="dkv-written-at-first-q-step",
        description="dkv kernel: dk/dv are written back after the first q block, not the last",
        module=KERNEL,
        old="should_write = q_index == grid_width - 1",
        new="should_write = q_index == 0",
    ),
    Mutant(
        name="fwd-gqa-head-map",
        description="forward: query head h reads key head h % kv_heads instead of "
        "h // (q_heads / kv_heads)",
        module=KERNEL,
        old="prefix = () if is_mqa else (_div(h, q_heads_per_kv_head),)",
        new="prefix = () if is_mqa else (lax.rem(h, num_kv_heads),)",
        occurrence=1,
    ),
    Mutant(
        name="dkv-gqa-written-after-first-head",
        description="dkv kernel, grouped heads: dk/dv are written after the group's first "
        "query head instead of its last",
        module=KERNEL,
        old="should_write, q_head_index_per_kv_head == q_heads_per_kv_heads - 1",
        new="should_write, q_head_index_per_kv_head == 0",
    ),
]
