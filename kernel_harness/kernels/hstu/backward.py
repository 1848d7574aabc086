"""Backward Pallas TPU kernel of HSTU pointwise attention (dq, dk, dv in one pass).

With ``s = scale * q k^T``, ``p = M * silu(s) / Lq`` and ``out = p v``:
``dv = p^T do``, ``ds = M * (do v^T) * silu'(s) / Lq`` where
``silu'(s) = sigmoid(s) * (1 + s * (1 - sigmoid(s)))``, ``dq = scale * ds k`` and
``dk = scale * ds^T q``.

The grid is ``(batch, head, kv block, q block)``: dk and dv accumulate over
the innermost q axis in f32 scratch. Each step also produces its tile's share
of dq, written to an f32 ``[num kv blocks, B, H, Lq, D]`` array that the
caller sums (no output block is ever revisited, so every grid axis but the q
axis may run in parallel). Score tiles are held transposed, ``[kv, q]``, so
the q axis lives in lanes: q segment ids come replicated over 8 sublanes
``[B, 8, Lq]``, kv segment ids over 128 lanes ``[B, Lkv, 128]``, and a
numpy mask as its transpose ``[Lkv, Lq]``. Block sparsity uses its own
tables (``bwd_flags``/``bwd_fetch`` indexed ``[kv block, q block]``; the
fetch index names the q block to DMA).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from kernel_harness.kernels.hstu.forward import (
    NUM_LANES,
    NUM_SUBLANES,
    KernelConfig,
    band_keep,
    lane_tile,
    nn,
    nt,
    optional_refs,
    tn,
)


def _bwd_kernel(
    flags_ref, fetch_ref, band_ref, q_ref, k_ref, v_ref, do_ref, *refs, cfg: KernelConfig
):
    qseg_ref, kvseg_ref, mask_ref, rest = optional_refs(refs, cfg)
    dq_ref, dk_ref, dv_ref, dk_acc, dv_acc = rest
    bq, bkv, bkc = cfg.block_q_dkv, cfg.block_kv_dkv, cfg.block_kv_dkv_compute
    inv_len = 1.0 / cfg.q_len
    j, i = pl.program_id(2), pl.program_id(3)
    run = flags_ref[j, i] != 0

    @pl.when(i == 0)
    def _init():
        dk_acc[...] = jnp.zeros_like(dk_acc)
        dv_acc[...] = jnp.zeros_like(dv_acc)

    @pl.when(jnp.logical_not(run))
    def _skip():
        dq_ref[...] = jnp.zeros_like(dq_ref)

    @pl.when(run)
    def _compute():
        q = q_ref[...]
        do = do_ref[...]
        dq = jnp.zeros(dq_ref.shape, jnp.float32)
        for c in range(bkv // bkc):
            ks = slice(c * bkc, (c + 1) * bkc)
            k = k_ref[ks, :]
            v = v_ref[ks, :]
            s = nt(k, q) * cfg.scale  # [bkc, bq]
            k_pos = j * bkv + c * bkc + jax.lax.broadcasted_iota(jnp.int32, (bkc, bq), 0)
            q_pos = i * bq + jax.lax.broadcasted_iota(jnp.int32, (bkc, bq), 1)
            keep = band_keep(q_pos, k_pos, band_ref)
            if mask_ref is not None:
                keep = keep & (mask_ref[ks, :] != 0)
            if qseg_ref is not None:
                keep = keep & (lane_tile(kvseg_ref[ks, :], bq) == qseg_ref[0:1, :])
            sig = jax.nn.sigmoid(s)
            p = jnp.where(keep, s * sig, 0.0) * inv_len
            dv_acc[ks, :] += nn(p.astype(do.dtype), do)
            dp = nt(v, do)
            ds = jnp.where(keep, dp * sig * (1.0 + s * (1.0 - sig)), 0.0) * inv_len
            ds = ds.astype(q.dtype)
            dk_acc[ks, :] += nn(ds, q) * cfg.scale
            dq = dq + tn(ds, k) * cfg.scale
        dq_ref[...] = dq

    @pl.when(i == pl.num_programs(3) - 1)
    def _store():
        dk_ref[...] = dk_acc[...].astype(dk_ref.dtype)
        dv_ref[...] = dv_acc[...].astype(dv_ref.dtype)


def hstu_backward(
    cfg: KernelConfig,
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    do: jax.Array,
    segs: dict[str, jax.Array] | None,
    tables: dict[str, jax.Array],
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Runs the backward kernel on ``[B, H, L, D]`` inputs; returns ``(dq, dk, dv)``.

    ``segs`` holds ``q_sublanes [B, 8, Lq]`` and ``kv_lanes [B, Lkv, 128]``;
    ``tables`` holds ``bwd_flags``/``bwd_fetch`` ``[nkv, nq]``, ``band`` and,
    with a numpy mask, ``mask_t [Lkv, Lq]`` int32.
    """
    batch, heads, q_len, dim = q.shape
    kv_len = k.shape[2]
    bq, bkv = cfg.block_q_dkv, cfg.block_kv_dkv
    num_kv = kv_len // bkv
    grid = (batch, heads, num_kv, q_len // bq)
    sq = pl.Squeezed()

    def q_map(b, h, j, i, flags, fetch, band):
        return b, h, fetch[j, i], 0

    def kv_map(b, h, j, i, *_):
        return b, h, j, 0

    in_specs = [
        pl.BlockSpec((sq, sq, bq, dim), q_map),
        pl.BlockSpec((sq, sq, bkv, dim), kv_map),
        pl.BlockSpec((sq, sq, bkv, dim), kv_map),
        pl.BlockSpec((sq, sq, bq, dim), q_map),
    ]
    operands = [q, k, v, do]
    if cfg.has_segments:
        in_specs += [
            pl.BlockSpec(
                (sq, NUM_SUBLANES, bq), lambda b, h, j, i, f, fetch, _: (b, 0, fetch[j, i])
            ),
            pl.BlockSpec((sq, bkv, NUM_LANES), lambda b, h, j, i, *_: (b, j, 0)),
        ]
        operands += [segs["q_sublanes"], segs["kv_lanes"]]
    if cfg.has_mask:
        in_specs.append(
            pl.BlockSpec((bkv, bq), lambda b, h, j, i, f, fetch, _: (j, fetch[j, i]))
        )
        operands.append(tables["mask_t"])
    out_specs = [
        pl.BlockSpec((sq, sq, sq, bq, dim), lambda b, h, j, i, *_: (j, b, h, i, 0)),
        pl.BlockSpec((sq, sq, bkv, dim), kv_map),
        pl.BlockSpec((sq, sq, bkv, dim), kv_map),
    ]
    out_shape = [
        jax.ShapeDtypeStruct((num_kv, *q.shape), jnp.float32),
        jax.ShapeDtypeStruct(k.shape, k.dtype),
        jax.ShapeDtypeStruct(v.shape, v.dtype),
    ]
    dq_parts, dk, dv = pl.pallas_call(
        functools.partial(_bwd_kernel, cfg=cfg),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=3,
            grid=grid,
            in_specs=in_specs,
            out_specs=out_specs,
            scratch_shapes=[
                pltpu.VMEM((bkv, dim), jnp.float32),
                pltpu.VMEM((bkv, dim), jnp.float32),
            ],
        ),
        out_shape=out_shape,
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "parallel", "arbitrary")
        ),
        interpret=cfg.interpret,
        name="hstu_bwd",
    )(tables["bwd_flags"], tables["bwd_fetch"], tables["band"], *operands)
    dq = jnp.sum(dq_parts, axis=0).astype(q.dtype)
    return dq, dk, dv
