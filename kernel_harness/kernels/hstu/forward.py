"""Forward Pallas TPU kernel of HSTU pointwise attention, and helpers shared with the backward.

Pointwise (HSTU) attention replaces softmax by a SiLU and a fixed normaliser:
``out = (M * silu(scale * q k^T) / q_len) v``. There is no running max or
denominator, so each (q block, kv block) tile adds independently into an f32
accumulator, and a tile the mask leaves empty can simply be skipped.

Block sparsity comes from the host: per (q block, kv block) a flag (0 = the
static mask leaves the tile empty, 1 = compute it) and a fetch index (the kv
block to DMA at that step; empty steps point at the next block that will be
computed, so the pipeline neither fetches unused data nor refetches it). Both
tables, and the diagonal band ``min_d <= k - q <= max_d`` that encodes causal
and sliding-window masks, are scalar-prefetched into SMEM; they are traced
operands, so every mask of the same shape shares one compiled kernel.

Layouts follow the TPU tiling rules: the kv axis of a score tile lives in
lanes (block sizes are multiples of 128), q segment ids come replicated
over 128 lanes ``[B, Lq, 128]`` and kv segment ids over 8 sublanes
``[B, 8, Lkv]``.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

NUM_LANES = 128
NUM_SUBLANES = 8
#: "No bound" for the band ``min_d <= k - q <= max_d`` (int32-safe, beyond any length).
BAND_UNBOUNDED = 1 << 30

_NT = (((1,), (1,)), ((), ()))  # a @ b.T
_NN = (((1,), (0,)), ((), ()))  # a @ b
_TN = (((0,), (0,)), ((), ()))  # a.T @ b


@dataclasses.dataclass(frozen=True, kw_only=True)
class KernelConfig:
    """Everything static about one HSTU call (hashable: it keys the jit caches)."""

    scale: float
    q_len: int
    kv_len: int
    block_q: int
    block_kv: int
    block_kv_compute: int
    block_q_dkv: int
    block_kv_dkv: int
    block_kv_dkv_compute: int
    has_segments: bool
    has_mask: bool
    interpret: Any


def matmul(a: jax.Array, b: jax.Array, dims: Any) -> jax.Array:
    """A dot with an f32 result; full f32 precision when the operands are f32."""
    precision = jax.lax.Precision.HIGHEST if a.dtype == jnp.float32 else None
    return jax.lax.dot_general(
        a, b, dims, precision=precision, preferred_element_type=jnp.float32
    )


def nt(a: jax.Array, b: jax.Array) -> jax.Array:
    """``a @ b.T`` in f32."""
    return matmul(a, b, _NT)


def nn(a: jax.Array, b: jax.Array) -> jax.Array:
    """``a @ b`` in f32."""
    return matmul(a, b, _NN)


def tn(a: jax.Array, b: jax.Array) -> jax.Array:
    """``a.T @ b`` in f32."""
    return matmul(a, b, _TN)


def band_keep(q_pos: jax.Array, k_pos: jax.Array, band_ref: Any) -> jax.Array:
    """Whether ``band_ref[0] <= k_pos - q_pos <= band_ref[1]`` (causal and window)."""
    d = k_pos - q_pos
    return (d >= band_ref[0]) & (d <= band_ref[1])


def lane_tile(x: jax.Array, width: int) -> jax.Array:
    """Repeats a ``[rows, 128]`` lane-replicated array to ``[rows, width]``."""
    return x if width == NUM_LANES else jnp.tile(x, (1, width // NUM_LANES))


def optional_refs(refs: tuple[Any, ...], cfg: KernelConfig) -> tuple[Any, Any, Any, list[Any]]:
    """``(q segment ids, kv segment ids, mask, the rest)`` of a kernel's trailing refs: the
    optional inputs come first, each only where ``cfg`` has it (else None)."""
    rest = list(refs)
    qseg_ref = kvseg_ref = mask_ref = None
    if cfg.has_segments:
        qseg_ref, kvseg_ref = rest.pop(0), rest.pop(0)
    if cfg.has_mask:
        mask_ref = rest.pop(0)
    return qseg_ref, kvseg_ref, mask_ref, rest


def _fwd_kernel(flags_ref, fetch_ref, band_ref, q_ref, k_ref, v_ref, *refs, cfg: KernelConfig):
    qseg_ref, kvseg_ref, mask_ref, (o_ref, acc_ref) = optional_refs(refs, cfg)
    bq, bkv, bkc = cfg.block_q, cfg.block_kv, cfg.block_kv_compute
    i, j = pl.program_id(2), pl.program_id(3)

    @pl.when(j == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    @pl.when(flags_ref[i, j] != 0)
    def _compute():
        q = q_ref[...]
        for c in range(bkv // bkc):
            ks = slice(c * bkc, (c + 1) * bkc)
            s = nt(q, k_ref[ks, :]) * cfg.scale
            q_pos = i * bq + jax.lax.broadcasted_iota(jnp.int32, (bq, bkc), 0)
            k_pos = j * bkv + c * bkc + jax.lax.broadcasted_iota(jnp.int32, (bq, bkc), 1)
            keep = band_keep(q_pos, k_pos, band_ref)
            if mask_ref is not None:
                keep = keep & (mask_ref[:, ks] != 0)
            if qseg_ref is not None:
                keep = keep & (lane_tile(qseg_ref[...], bkc) == kvseg_ref[0:1, ks])
            # jnp.where, not a multiply: masked scores never reach the accumulator.
            p = jnp.where(keep, s * jax.nn.sigmoid(s), 0.0) * (1.0 / cfg.q_len)
            v = v_ref[ks, :]
            acc_ref[...] += nn(p.astype(v.dtype), v)

    @pl.when(j == pl.num_programs(3) - 1)
    def _store():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def hstu_forward(
    cfg: KernelConfig,
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    segs: dict[str, jax.Array] | None,
    tables: dict[str, jax.Array],
) -> jax.Array:
    """Runs the forward kernel on ``[B, H, L, D]`` inputs; returns ``[B, H, Lq, D]``.

    ``segs`` holds the layouts ``q_lanes [B, Lq, 128]`` and ``kv_sublanes
    [B, 8, Lkv]``; ``tables`` holds ``fwd_flags``/``fwd_fetch`` ``[nq, nkv]``,
    ``band`` ``[2]`` and, with a numpy mask, ``mask [Lq, Lkv]`` int32.
    """
    batch, heads, q_len, dim = q.shape
    bq, bkv = cfg.block_q, cfg.block_kv
    grid = (batch, heads, q_len // bq, cfg.kv_len // bkv)
    sq = pl.Squeezed()

    def q_map(b, h, i, j, flags, fetch, band):
        return b, h, i, 0

    def kv_map(b, h, i, j, flags, fetch, band):
        return b, h, fetch[i, j], 0

    in_specs = [
        pl.BlockSpec((sq, sq, bq, dim), q_map),
        pl.BlockSpec((sq, sq, bkv, dim), kv_map),
        pl.BlockSpec((sq, sq, bkv, dim), kv_map),
    ]
    operands = [q, k, v]
    if cfg.has_segments:
        in_specs += [
            pl.BlockSpec((sq, bq, NUM_LANES), lambda b, h, i, j, *_: (b, i, 0)),
            pl.BlockSpec(
                (sq, NUM_SUBLANES, bkv), lambda b, h, i, j, f, fetch, _: (b, 0, fetch[i, j])
            ),
        ]
        operands += [segs["q_lanes"], segs["kv_sublanes"]]
    if cfg.has_mask:
        in_specs.append(
            pl.BlockSpec((bq, bkv), lambda b, h, i, j, f, fetch, _: (i, fetch[i, j]))
        )
        operands.append(tables["mask"])
    return pl.pallas_call(
        functools.partial(_fwd_kernel, cfg=cfg),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=3,
            grid=grid,
            in_specs=in_specs,
            out_specs=pl.BlockSpec((sq, sq, bq, dim), q_map),
            scratch_shapes=[pltpu.VMEM((bq, dim), jnp.float32)],
        ),
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "parallel", "arbitrary")
        ),
        interpret=cfg.interpret,
        name="hstu_fwd",
    )(tables["fwd_flags"], tables["fwd_fetch"], tables["band"], *operands)
