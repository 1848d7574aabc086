"""Mutant catalog for flywheel-tpu-kda: bugs planted in flywheel-tpu's fused conv1d + KDA
serving kernel (``kernel-harness mutate flywheel-tpu-kda``), the per-channel gate's among
them."""

from __future__ import annotations

from kernel_harness.records.mutant import CI, Mutant, edits_of

_compute = edits_of("flywheel_tpu.linear_attention.kda.compute_kda")
_meta = edits_of("flywheel_tpu.linear_attention.kda.metadata")
_wrapper = edits_of("flywheel_tpu.linear_attention.kda.wrapper")

MUTANTS: list[Mutant] = [
    _compute("gate-without-dt-bias", "the log decay forgets dt_bias: -exp(a_log) "
             "softplus(g)", "biased_gate = gate + dt_bias", "biased_gate = gate", tags=CI),
    _compute("chunk-decay-of-first-channel", "the chunked path's carried state decays "
             "every key row by the chunk's decay of channel 0 (a per-head gate's decay)",
             "jnp.exp(g_last), src_dim=2, dst_dim=1)",
             "jnp.exp(g_last[..., :1] + 0 * g_last), src_dim=2, dst_dim=1)", tags=CI),
    _compute("decode-beta-unsquashed", "the decode path's beta is b itself, not sigmoid(b)",
             "beta = b_token if cfg.beta_is_activated else jax.nn.sigmoid(b_token)",
             "beta = b_token", tags=CI),
    _compute("chunk-q-unscaled", "the chunked path forgets q's d_k^-1/2 after the L2 norm",
             "q_normed = l2_norm(q_chunked) * cfg.kq_head_dim**-0.5",
             "q_normed = l2_norm(q_chunked)"),
    _meta("fresh-sequence-resumes", "prefill and continued sequences all count as having "
          "an initial state: a fresh sequence resumes from its slot's stale states",
          "s_idx_has_initial_state=(seq_lens - query_lens) > 0,",
          "s_idx_has_initial_state=(seq_lens - query_lens) >= 0,", tags=CI),
    _wrapper("read-slots-ignored", "every sequence reads its initial states from its write "
             "slot (read_state_indices ignored)",
             "read_state_indices = read_state_indices.astype(state_indices.dtype)",
             "read_state_indices = state_indices", tags=CI),
]
