"""Mutant catalog for flywheel-tpu-flash: bugs planted in flywheel-tpu's flash attention
source (``kernel_harness.records.mutant``; ``kernel-harness mutate``)."""

from __future__ import annotations

from kernel_harness.records.mutant import CI, Mutant, edits_of

_api = edits_of("flywheel_tpu.flash_attn_interface")
_fwd = edits_of("flywheel_tpu.pallas.fwd_pipeline")
_bwd = edits_of("flywheel_tpu.pallas.bwd_pipeline")
_bwd_entry = edits_of("flywheel_tpu.pallas.flash_bwd")

MUTANTS: list[Mutant] = [
    _api("scale-without-log2e", "the fused q scale leaves out log2(e): natural-log logits "
         "reach the kernel's exp2 (a softmax at the wrong temperature)",
         "return softmax_scale * LOG2E", "return softmax_scale", tags=CI),
    _api("causal-top-left", "the causal diagonal is anchored top-left (offset 0), not on "
         "the sequences' ends", "causal_offset = seqlen_k - seqlen_q", "causal_offset = 0",
         tags=CI),
    _fwd("row-sum-forgets-earlier-tiles", "a row's softmax denominator keeps only its last "
         "kv tile's sum", "is_row_start, frag_row_sum, row_sum_prev + frag_row_sum)",
         "is_row_start, frag_row_sum, frag_row_sum)"),
    _bwd("ds-without-delta", "dS drops the rowsum(dO * O) term: dS = P * dP",
         "ds = (dp - di_row) * p", "ds = dp * p", tags=CI),
    _bwd("dk-unscaled", "dK is not multiplied by the softmax scale",
         "dk_tile = scale * lax.dot_general(", "dk_tile = lax.dot_general("),
    _bwd("backward-causal-top-left", "the backward's causal mask forgets the bottom-right "
         "offset", "q_start + causal_offset, k_start)", "q_start, k_start)"),
    _bwd_entry("lse-in-nats", "the backward recomputes P against the natural-log lse where "
               "it works in log2 units", "lse_log2 = (lse.astype(jnp.float32) * LOG2E)"
               "[:, None, :]", "lse_log2 = lse.astype(jnp.float32)[:, None, :]"),
]
