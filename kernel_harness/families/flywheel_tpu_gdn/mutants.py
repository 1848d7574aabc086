"""Mutant catalog for flywheel-tpu-gdn: bugs planted in flywheel-tpu's fused conv1d + Gated
DeltaNet serving kernel (``kernel-harness mutate flywheel-tpu-gdn``)."""

from __future__ import annotations

from kernel_harness.records.mutant import CI, Mutant, edits_of

_compute = edits_of("flywheel_tpu.linear_attention.gdn.compute_gdn")
_conv = edits_of("flywheel_tpu.linear_attention.gdn.compute_conv1d")
_meta = edits_of("flywheel_tpu.linear_attention.gdn.metadata")
_wrapper = edits_of("flywheel_tpu.linear_attention.gdn.wrapper")

MUTANTS: list[Mutant] = [
    _compute("silu-is-sigmoid", "the activation after the conv is sigmoid(x), not x "
             "sigmoid(x)", "return 0.5 * pre_activation * (1.0 + jnp.tanh(0.5 * pre_activation))",
             "return 0.5 * (1.0 + jnp.tanh(0.5 * pre_activation))", tags=CI),
    _compute("chunk-gate-without-dt-bias", "the chunked (prefill) path's decay gate "
             "forgets dt_bias: g = -exp(a_log) softplus(a)",
             "g = -jnp.exp(a_log) * jax.nn.softplus(a_chunked + dt_bias)",
             "g = -jnp.exp(a_log) * jax.nn.softplus(a_chunked)", tags=CI),
    _compute("decode-beta-unsquashed", "the decode path's beta is b itself, not sigmoid(b)",
             "beta = jax.nn.sigmoid(b_token)", "beta = b_token", tags=CI),
    _compute("chunk-q-unscaled", "the chunked path forgets q's d_k^-1/2 after the L2 norm",
             "q_normed = l2_norm(q_chunked) * cfg.kq_head_dim**-0.5",
             "q_normed = l2_norm(q_chunked)"),
    _meta("fresh-sequence-resumes", "prefill and continued sequences all count as having "
          "an initial state: a fresh sequence resumes from its slot's stale states",
          "s_idx_has_initial_state=(seq_lens - query_lens) > 0,",
          "s_idx_has_initial_state=(seq_lens - query_lens) >= 0,", tags=CI),
    _meta("prefill-reads-write-slot", "prefill and continued sequences read their "
          "initial state from state_indices, not read_state_indices",
          "s_idx_to_read_indices=read_indices,\n    )",
          "s_idx_to_read_indices=state_indices,\n    )"),
    _wrapper("read-slots-ignored", "every sequence reads its initial states from its write "
             "slot (read_state_indices, prefix caching's resume slot, ignored)",
             "read_state_indices = read_state_indices.astype(state_indices.dtype)",
             "read_state_indices = state_indices", tags=CI),
    _conv("conv-bias-dropped", "the chunked path's conv drops the bias",
          "        biased_out = conv_out + conv_bias[jnp.newaxis]",
          "        biased_out = conv_out"),
]
