"""Independent mutants of deltanet-tpu 0.3.0's chunk_gdn2 (deltanet_tpu.gdn2), the Pallas
fp32 path the family runs (no fuse_prologue, no recompute_states, no mask_lambda_by_doc)."""

from kernel_harness.records.mutant import Mutant

_M = "deltanet_tpu.gdn2"


def _m(name, doc, old, new, occurrence=None, tags=()):
    return Mutant(name=name, description=doc, module=_M, old=old, new=new, occurrence=occurrence,
                  tags=tags)


MUTANTS = [
    _m("ind-gdn-no-reset-fwd",
       "forward kernel: no state reset when a chunk starts a new document (chunk-aligned boundary)",
       "    S_carry = jnp.where((~is_chunk_0) & is_new_doc, jnp.zeros((K, V), dtype=jnp.float32), S_carry)\n\n"
       "    if save_all_states:",
       "    if save_all_states:"),
    _m("ind-gdn-no-interchunk-decay",
       "forward kernel: carried state not decayed by the chunk's total decay",
       "S_init_decayed = jnp.where(all_same_doc, S_carry * jnp.exp(_nonpositive(decay_c[:, None])), 0.0)",
       "S_init_decayed = jnp.where(all_same_doc, S_carry, 0.0)", occurrence=1),
    _m("ind-gdn-bwd-no-adjoint-decay",
       "backward kernel: adjoint state carried to the previous chunk without the chunk decay",
       "dH_raw = jnp.where(all_same_doc, dH_next * decay, 0.0)",
       "dH_raw = jnp.where(all_same_doc, dH_next, 0.0)"),
    _m("ind-gdn-bwd-no-adjoint-reset",
       "backward kernel: adjoint state not reset at a chunk that starts a new document",
       "dH_prev = jnp.where(is_new_doc, jnp.zeros_like(dH_raw), dH_raw)",
       "dH_prev = dH_raw"),
    _m("ind-gdn-causal-strict",
       "forward prepass: intra-chunk output mask strictly causal (drops each token's own update)",
       "causal = (iota[:, None] >= iota[None, :]) & same_doc_pair",
       "causal = (iota[:, None] > iota[None, :]) & same_doc_pair", occurrence=1),
    _m("ind-gdn-causal-no-doc-mask",
       "forward prepass: intra-chunk output mask ignores documents (previous document leaks in)",
       "causal = (iota[:, None] >= iota[None, :]) & same_doc_pair",
       "causal = (iota[:, None] >= iota[None, :])", occurrence=1),
    _m("ind-gdn-prev-seg-off-by-one",
       "wrapper: previous-chunk segment read at the chunk's first token, not the one before: chunk-aligned boundaries never reset",
       "seg_ids[:, (jnp.arange(1, NC) * chunk_size - 1)]",
       "seg_ids[:, (jnp.arange(1, NC) * chunk_size)]"),
    _m("ind-gdn-lambda-end-off-by-one",
       "forward prepass: chunk-end cumulative decay taken at the second-to-last token",
       "Lambda_end = jax.lax.slice(Lambda, (chunk_size - 1, 0), (chunk_size, K))",
       "Lambda_end = jax.lax.slice(Lambda, (chunk_size - 2, 0), (chunk_size - 1, K))", occurrence=1),
    _m("ind-gdn-intra-bf16",
       "forward kernel: intra-chunk output matmul on bfloat16-rounded operands where fp32 is declared",
       "O_chunk = _mm_intra(m_c, V_new)",
       "O_chunk = _mm_intra(m_c.astype(jnp.bfloat16), V_new.astype(jnp.bfloat16))"),
    _m("ind-gdn-pad-seg-zero",
       "wrapper: padded tail's segment ids padded with 0 instead of the last id (pad becomes a new document)",
       'seg_ids = jnp.pad(seg_ids, ((0, 0), (0, pad_len)), mode="edge")',
       "seg_ids = jnp.pad(seg_ids, ((0, 0), (0, pad_len)))"),
    _m("ind-gdn-h0-fused-no-transpose",
       "wrapper (training path): value-head-fused initial state reshaped without the K/G transpose",
       "init_fused = initial_state.reshape(B, Hk, G_v_fuse, K, V).transpose(0, 1, 3, 2, 4).reshape(B, Hk, K, G_v_fuse * V)",
       "init_fused = initial_state.reshape(B, Hk, K, G_v_fuse * V)", occurrence=2),
    _m("ind-gdn-bwd-dq-no-doc-mask",
       "backward prepass: dq's inter-chunk term not masked to the chunk's first document",
       "d_q_exp = jnp.where(same_doc_as_start, dqe, 0.0)",
       "d_q_exp = dqe"),
]

#: The implementation the mutants are run through: the family's call with the library bound
#: at run time (see gdn2_runtime_bound.py: the family's own adapter fails its control run).
IMPL = "tests.mutants_independent.gdn2_runtime_bound:chunk_gdn2"

# Second batch (written after the first run): subtler bugs, and one equivalent on the drawn inputs.
MUTANTS += [
    _m("ind-gdn-no-newton-refine",
       "triangular inverse: the Newton-Schulz refinement step dropped (returns the unrefined T)",
       "    err = 2.0 * eye - jnp.matmul(L, T, precision=precision)\n"
       "    return jnp.matmul(T, err, precision=precision)",
       "    err = 2.0 * eye - jnp.matmul(L, T, precision=precision)\n"
       "    return T"),
    _m("ind-gdn-bwd-ddecay-no-doc-mask",
       "backward kernel: the chunk-decay gradient not masked where the chunk spans a document boundary",
       "d_decay_c = jnp.where(all_same_doc, jnp.sum(dH_next * S_c * decay * subgrad, axis=-1), 0.0)",
       "d_decay_c = jnp.sum(dH_next * S_c * decay * subgrad, axis=-1)"),
    _m("ind-gdn-gqa-dq-mean",
       "[EQUIVALENT on the drawn inputs] GQA dq reduced with mean instead of sum over the value-head group "
       "(only the gates-per-value-head path, which the family does not draw: G_qk is 1 here)",
       "dq = dq_3d.reshape(B, L, Hk, G_qk, K).sum(axis=3)",
       "dq = dq_3d.reshape(B, L, Hk, G_qk, K).mean(axis=3)", tags=("equivalent",)),
]
