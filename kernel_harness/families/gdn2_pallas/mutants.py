"""Mutant catalog for gdn2-pallas: bugs planted in gdn2-pallas's ``atomic_ops.gdn2_fwd``
(kernels A, B, C and the XLA inter-chunk scan "kernel D") and ``atomic_ops.gdn2_bwd``
(kernels B3, B4 and the XLA state adjoint B1), run by ``kernel-harness mutate``. The
trainable path's forward is ``gdn2_inter_chunk_combine_with_state`` (the second
occurrence of its scan's lines)."""

from __future__ import annotations

from kernel_harness.records.mutant import CI, Mutant, edits_of

_fwd = edits_of("atomic_ops.gdn2_fwd")
_bwd = edits_of("atomic_ops.gdn2_bwd")

MUTANTS: list[Mutant] = [
    _fwd("aqk-diagonal-dropped", "kernel A masks the output scores strictly lower (strict "
         "where it must be causal): a token's output misses its own write",
         "aqk_blk = aqk_blk * causal", "aqk_blk = aqk_blk * strict", tags=CI),
    _fwd("decay-floor-e-5", "kernel A floors the pairwise decay at e^-5 instead of e^-20: "
         "tokens far apart in a chunk still see each other",
         "edecay = jnp.exp(jnp.clip(decay_diff, -20.0, 20.0))",
         "edecay = jnp.exp(jnp.clip(decay_diff, -5.0, 20.0))"),
    _fwd("micro-blocks-uncoupled", "kernel B's WY solve drops the coupling between "
         "micro-blocks (off-diagonal blocks of the inverse built from zero)",
         "acc = sanitize(acc + contrib, config)", "acc = sanitize(acc, config)"),
    _fwd("query-not-decayed", "kernel C reads the carried state with q undecayed within "
         "the chunk (qg = q, not q exp(gc))",
         "qg = q * jnp.exp(gc)", "qg = q", tags=CI),
    _fwd("state-not-decayed-across-chunks", "the inter-chunk scan carries the state to "
         "the next chunk without the chunk's total decay",
         "h_new = h_pre * decay_h + write", "h_new = h_pre + write", occurrence=2),
    _bwd("dq-not-decayed", "kernel B3's dq from the carried state misses exp(gc)",
         "dq = dqg * jnp.exp(gc)", "dq = dqg", tags=CI),
    _bwd("intra-dq-unscaled", "kernel B4 forgets the scale on the intra-chunk dq",
         "dL_qk * scale", "dL_qk"),
    _bwd("adjoint-not-decayed", "the backward's state adjoint is carried to the previous "
         "chunk without the chunk's decay",
         "contrib_from_state = dh_carry * decay_c", "contrib_from_state = dh_carry"),
]
