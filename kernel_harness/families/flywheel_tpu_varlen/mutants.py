"""Mutant catalog for flywheel-tpu-varlen: bugs planted in flywheel-tpu's varlen schedule and
forward pipeline (``kernel_harness.records.mutant``; ``kernel-harness mutate``)."""

from __future__ import annotations

from kernel_harness.records.mutant import CI, Mutant, edits_of

_api = edits_of("flywheel_tpu.flash_attn_interface")
_sched = edits_of("flywheel_tpu.pallas.loop_schedule")
_fwd = edits_of("flywheel_tpu.pallas.fwd_pipeline")

MUTANTS: list[Mutant] = [
    _sched("cu-seqlens-end-off-by-one", "a sequence owns keys up to and including "
           "cu_seqlens_k[s + 1]: its rows see the next sequence's first key",
           "k_abs >= owned_lo, k_abs < ctx.kv_end)", "k_abs >= owned_lo, k_abs <= ctx.kv_end)",
           tags=CI),
    _sched("causal-top-left-per-sequence", "each sequence's causal diagonal and window "
           "are anchored at its first tokens (top-left), not its last",
           "bottom_right_offset = kv_end - q_end", "bottom_right_offset = kv_start - q_start",
           tags=CI),
    _sched("window-left-edge-dropped", "a row's window stops one key short of its left "
           "edge", "q_upper = k_abs - ctx.bottom_right_offset + left",
           "q_upper = k_abs - ctx.bottom_right_offset + left - 1"),
    _fwd("gqa-heads-interleaved", "query head h reads kv head h mod kv_heads "
         "(interleaved) instead of h // group (blocked)",
         "kv_head = base_head // q_heads_per_kv_head",
         "kv_head = base_head % (num_head_groups // q_heads_per_kv_head)", tags=CI),
    _fwd("q-scale-in-bf16", "Q times the fused scale is multiplied in bfloat16 (the scale "
         "itself rounded), where the flash design multiplies in float32 and rounds once",
         "q_ref[...].astype(jnp.float32) * q_scale).astype(q_buf.dtype)",
         "q_ref[...] * jnp.asarray(q_scale, q_ref.dtype)).astype(q_buf.dtype)", tags=CI),
    _fwd("lse-in-log2", "the returned lse stays in log2 units (no ln 2 factor)",
         "(row_max + jnp.log2(row_sum_new_ref[:, 0:1])) * math.log(2.0))",
         "(row_max + jnp.log2(row_sum_new_ref[:, 0:1])))"),
    _api("scale-without-log2e", "the fused q scale leaves out log2(e): natural-log logits "
         "reach the kernel's exp2", "return softmax_scale * LOG2E", "return softmax_scale"),
]
