"""Mutant catalog for deltanet-tpu-gdn2: bugs planted in deltanet-tpu's ``gdn2`` module
(its inter-chunk forward and backward Pallas kernels; ``kernel-harness mutate``). Where a
line recurs, the first occurrence is the training path's forward kernel
(``_split_chunk_fwd_kernel``; the others are the recompute and single-chunk kernels)."""

from __future__ import annotations

from kernel_harness.records.mutant import CI, Mutant, edits_of

_gdn2 = edits_of("deltanet_tpu.gdn2")

MUTANTS: list[Mutant] = [
    _gdn2("initial-state-ignored", "the forward starts every row from a zero state, never "
          "from initial_state",
          "S_chunk_0 = jnp.where(is_new_doc, jnp.zeros((K, V), dtype=jnp.float32), init_s)",
          "S_chunk_0 = jnp.zeros((K, V), dtype=jnp.float32)", occurrence=1, tags=CI),
    _gdn2("no-reset-at-chunk-start", "a document starting on a chunk's first token keeps "
          "the previous document's state",
          "S_carry = jnp.where((~is_chunk_0) & is_new_doc,",
          "S_carry = jnp.where((~is_chunk_0) & is_new_doc & False,", occurrence=1),
    _gdn2("state-not-decayed-across-chunks", "the state carried to the next chunk misses "
          "the chunk's total decay",
          "S_init_decayed = jnp.where(all_same_doc, S_carry * jnp.exp(_nonpositive("
          "decay_c[:, None])), 0.0)",
          "S_init_decayed = jnp.where(all_same_doc, S_carry, 0.0)", occurrence=1, tags=CI),
    _gdn2("state-matmuls-in-bf16", "the forward's state matmuls take bfloat16 operands even "
          "in precision='fp32'",
          "state_prec = jax.lax.Precision.HIGHEST if state_fp32_matmul else prec",
          "state_prec = jax.lax.Precision.DEFAULT", occurrence=1),
    _gdn2("output-misses-carried-state", "a chunk's output forgets the state carried in "
          "(only the chunk's own tokens count)",
          "O_total = O_init + O_chunk", "O_total = O_chunk", occurrence=1),
    _gdn2("decay-gradient-dropped", "the backward drops the carried state's share of dg",
          "jnp.sum(dH_next * S_c * decay * subgrad, axis=-1), 0.0)",
          "0.0 * jnp.sum(dH_next * S_c * decay * subgrad, axis=-1), 0.0)", tags=CI),
    _gdn2("adjoint-not-decayed", "the backward carries the state's adjoint to the previous "
          "chunk without the chunk's decay",
          "dH_raw = jnp.where(all_same_doc, dH_next * decay, 0.0)",
          "dH_raw = jnp.where(all_same_doc, dH_next, 0.0)"),
    _gdn2("adjoint-leaks-across-documents", "the backward's adjoint is not reset at a "
          "document that starts a chunk: gradients flow into the previous document",
          "dH_prev = jnp.where(is_new_doc, jnp.zeros_like(dH_raw), dH_raw)",
          "dH_prev = dH_raw"),
]
