"""Planted bugs in our own HSTU kernel's source for ``kernel-harness mutate hstu``.

Each is a one-line edit a kernel author could plausibly make; the family's check
must catch every one (``ci``-tagged ones on the interpret backend within the
default example budget).
"""

from __future__ import annotations

from kernel_harness.records.mutant import CI, Mutant, edits_of

_fwd = edits_of("kernel_harness.kernels.hstu.forward")
_bwd = edits_of("kernel_harness.kernels.hstu.backward")
_plan = edits_of("kernel_harness.kernels.hstu.planning")

MUTANTS: list[Mutant] = [
    _fwd("fwd-normalises-by-kv-len", "forward divides by kv_len instead of q_len",
         "* (1.0 / cfg.q_len)", "* (1.0 / cfg.kv_len)", tags=CI),
    _fwd("band-upper-bound-exclusive",
         "causal/window band drops its upper edge (causal excludes the diagonal)",
         "(d <= band_ref[1])", "(d < band_ref[1])", tags=CI),
    _fwd("fwd-compute-block-offset", "forward mask forgets the kv compute sub-block offset",
         "k_pos = j * bkv + c * bkc + jax", "k_pos = j * bkv + jax"),
    _fwd("fwd-acc-not-reset", "the f32 accumulator is not zeroed at the first kv block",
         "acc_ref[...] = jnp.zeros_like(acc_ref)", "pass", tags=CI),
    _fwd("fwd-segments-batch-0", "q segment ids always read from batch row 0",
         "lambda b, h, i, j, *_: (b, i, 0)", "lambda b, h, i, j, *_: (0, i, 0)"),
    _bwd("bwd-ignores-segments", "the backward kernel forgets the segment mask",
         "keep = keep & (lane_tile(kvseg_ref[ks, :], bq) == qseg_ref[0:1, :])", "keep = keep",
         tags=CI),
    _bwd("bwd-compute-block-offset", "backward mask forgets the kv compute sub-block offset",
         "k_pos = j * bkv + c * bkc + jax", "k_pos = j * bkv + jax"),
    _bwd("bwd-dk-unscaled", "dk misses the logit scale", "dk_acc[ks, :] += nn(ds, q) * cfg.scale",
         "dk_acc[ks, :] += nn(ds, q)", tags=CI),
    _bwd("bwd-silu-derivative", "silu'(s) written as sigmoid(s) * (1 + s * sigmoid(s))",
         "(1.0 + s * (1.0 - sig))", "(1.0 + s * sig)"),
    _bwd("bwd-dq-not-zeroed-on-skip", "skipped backward tiles leave their dq share unwritten",
         "dq_ref[...] = jnp.zeros_like(dq_ref)", "pass"),
    _plan("plan-band-blocks-off-by-one",
          "block flags of a band miss the block holding its last diagonal",
          "d_max = j * bkv + bkv - 1 - i * bq", "d_max = j * bkv - 1 - i * bq"),
    _plan("plan-fetch-previous-block",
          "the fetch table names the previous flagged block, not the current one",
          "fetch[r] = on[np.minimum(nxt, on.size - 1)]", "fetch[r] = on[np.maximum(nxt - 1, 0)]"),
    # Added by the mutation-harness helper: precision, grid-step and head-mapping bugs.
    _fwd("fwd-pv-in-bf16", "forward: the PV product runs with bfloat16 operands (precision loss in "
         "the accumulator for float32 inputs)", "acc_ref[...] += nn(p.astype(v.dtype), v)",
         "acc_ref[...] += nn(p.astype(jnp.bfloat16), v.astype(jnp.bfloat16))"),
    _bwd("bwd-dv-in-bf16", "backward: the dv product runs with bfloat16 operands",
         "dv_acc[ks, :] += nn(p.astype(do.dtype), do)",
         "dv_acc[ks, :] += nn(p.astype(jnp.bfloat16), do.astype(jnp.bfloat16))"),
    _fwd("fwd-stored-at-first-kv-step",
         "forward: the output is written after the first kv block, not the last",
         "@pl.when(j == pl.num_programs(3) - 1)", "@pl.when(j == 0)"),
    _bwd("bwd-dkv-stored-at-first-q-step",
         "backward: dk/dv are written after the first q block, not the last",
         "@pl.when(i == pl.num_programs(3) - 1)", "@pl.when(i == 0)"),
    _fwd("fwd-kv-head-0", "forward: every query head reads key/value head 0",
         "return b, h, fetch[i, j], 0", "return b, 0, fetch[i, j], 0"),
    _bwd("bwd-dq-head-0", "backward: every head's dq share is written to head 0",
         "lambda b, h, j, i, *_: (j, b, h, i, 0)", "lambda b, h, j, i, *_: (j, b, 0, i, 0)"),
]
