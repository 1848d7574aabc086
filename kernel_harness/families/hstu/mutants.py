"""Planted bugs in our own HSTU kernel's source for ``kernel-harness mutate hstu``.

Each is a one-line edit a kernel author could plausibly make; the family's check
must catch every one (``ci``-tagged ones on the interpret backend within the
default example budget).
"""

from __future__ import annotations

from kernel_harness.spec.mutant import Mutant

_FWD = "kernel_harness.kernels.hstu.forward"
_BWD = "kernel_harness.kernels.hstu.backward"
_PLAN = "kernel_harness.kernels.hstu.planning"

MUTANTS: list[Mutant] = [
    Mutant(
        name="fwd-normalises-by-kv-len",
        description="forward divides by kv_len instead of q_len",
        module=_FWD,
        old="* (1.0 / cfg.q_len)",
        new="* (1.0 / cfg.kv_len)",
        tags=("ci",),
    ),
    Mutant(
        name="band-upper-bound-exclusive",
        description="causal/window band drops its upper edge (causal excludes the diagonal)",
        module=_FWD,
        old="(d <= band_ref[1])",
        new="(d < band_ref[1])",
        tags=("ci",),
    ),
    Mutant(
        name="fwd-compute-block-offset",
        description="forward mask forgets the kv compute sub-block offset",
        module=_FWD,
        old="k_pos = j * bkv + c * bkc + jax",
        new="k_pos = j * bkv + jax",
    ),
    Mutant(
        name="fwd-acc-not-reset",
        description="the f32 accumulator is not zeroed at the first kv block",
        module=_FWD,
        old="acc_ref[...] = jnp.zeros_like(acc_ref)",
        new="pass",
        tags=("ci",),
    ),
    Mutant(
        name="fwd-segments-batch-0",
        description="q segment ids always read from batch row 0",
        module=_FWD,
        old="lambda b, h, i, j, *_: (b, i, 0)",
        new="lambda b, h, i, j, *_: (0, i, 0)",
    ),
    Mutant(
        name="bwd-ignores-segments",
        description="the backward kernel forgets the segment mask",
        module=_BWD,
        old="keep = keep & (lane_tile(kvseg_ref[ks, :], bq) == qseg_ref[0:1, :])",
        new="keep = keep",
        tags=("ci",),
    ),
    Mutant(
        name="bwd-compute-block-offset",
        description="backward mask forgets the kv compute sub-block offset",
        module=_BWD,
        old="k_pos = j * bkv + c * bkc + jax",
        new="k_pos = j * bkv + jax",
    ),
    Mutant(
        name="bwd-dk-unscaled",
        description="dk misses the logit scale",
        module=_BWD,
        old="dk_acc[ks, :] += nn(ds, q) * cfg.scale",
        new="dk_acc[ks, :] += nn(ds, q)",
        tags=("ci",),
    ),
    Mutant(
        name="bwd-silu-derivative",
        description="silu'(s) written as sigmoid(s) * (1 + s * sigmoid(s))",
        module=_BWD,
        old="(1.0 + s * (1.0 - sig))",
        new="(1.0 + s * sig)",
    ),
    Mutant(
        name="bwd-dq-not-zeroed-on-skip",
        description="skipped backward tiles leave their dq share unwritten",
        module=_BWD,
        old="dq_ref[...] = jnp.zeros_like(dq_ref)",
        new="pass",
    ),
    Mutant(
        name="plan-band-blocks-off-by-one",
        description="block flags of a band miss the block holding its last diagonal",
        module=_PLAN,
        old="d_max = j * bkv + bkv - 1 - i * bq",
        new="d_max = j * bkv - 1 - i * bq",
        tags=("ci",),
    ),
    Mutant(
        name="plan-fetch-previous-block",
        description="the fetch table names the previous flagged block, not the current one",
        module=_PLAN,
        old="fetch[r] = on[np.minimum(nxt, on.size - 1)]",
        new="fetch[r] = on[np.maximum(nxt - 1, 0)]",
    ),
    # Added by the mutation-harness helper: precision, grid-step and head-mapping bugs.
    Mutant(
        name="fwd-pv-in-bf16",
        description="forward: the PV product runs with bfloat16 operands (precision loss in "
        "the accumulator for float32 inputs)",
        module=_FWD,
        old="acc_ref[...] += nn(p.astype(v.dtype), v)",
        new="acc_ref[...] += nn(p.astype(jnp.bfloat16), v.astype(jnp.bfloat16))",
    ),
    Mutant(
        name="bwd-dv-in-bf16",
        description="backward: the dv product runs with bfloat16 operands",
        module=_BWD,
        old="dv_acc[ks, :] += nn(p.astype(do.dtype), do)",
        new="dv_acc[ks, :] += nn(p.astype(jnp.bfloat16), do.astype(jnp.bfloat16))",
    ),
    Mutant(
        name="fwd-stored-at-first-kv-step",
        description="forward: the output is written after the first kv block, not the last",
        module=_FWD,
        old="@pl.when(j == pl.num_programs(3) - 1)",
        new="@pl.when(j == 0)",
    ),
    Mutant(
        name="bwd-dkv-stored-at-first-q-step",
        description="backward: dk/dv are written after the first q block, not the last",
        module=_BWD,
        old="@pl.when(i == pl.num_programs(3) - 1)",
        new="@pl.when(i == 0)",
    ),
    Mutant(
        name="fwd-kv-head-0",
        description="forward: every query head reads key/value head 0",
        module=_FWD,
        old="return b, h, fetch[i, j], 0",
        new="return b, 0, fetch[i, j], 0",
    ),
    Mutant(
        name="bwd-dq-head-0",
        description="backward: every head's dq share is written to head 0",
        module=_BWD,
        old="lambda b, h, j, i, *_: (j, b, h, i, 0)",
        new="lambda b, h, j, i, *_: (j, b, 0, i, 0)",
    ),
]
