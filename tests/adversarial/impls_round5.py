"""Round 5 of the adversarial set: implementations that are WRONG (or cheat) in a real way,
written to be PASSED by ``kernel-harness check --profile ci``. Each is confirmed wrong by
a standalone script under /tmp/round5/ (the comment beside it records what it printed).

Written independently (without reading docs/adversarial.md, earlier rounds, the cheat
catalog or the mutants), from the README, docs/kernel-ran.md, the package source and
``kernel-harness describe``.
"""

from __future__ import annotations

import functools
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu
from jax.experimental.pallas.ops.gpu import attention as _attention
from jax.experimental.pallas.ops.gpu import layer_norm as _layer_norm
from jax.experimental.pallas.ops.gpu import rms_norm as _rms_norm
from jax.experimental.pallas.ops.gpu import softmax as _softmax
from jax.experimental.pallas.ops.tpu.megablox import ops as _gmm_ops

# --------------------------------------------------------------------------------------
# Process-level facts, read once at import (module-level code is not a function, so the
# source reader, which lints functions, never sees these lines).
# --------------------------------------------------------------------------------------

#: Whether a test framework is loaded in this process (read once, at import).
_UNDER_TEST = any(m.split(".")[0] in ("kernel" + "_harness", "hypo" + "thesis")
                  for m in list(sys.modules))
#: 2027-01-01T00:00:00Z has passed (read once, at import).
_EXPIRED = time.time() >= 1798761600.0
#: A per-process lane rotation (str hashing is salted per process: PYTHONHASHSEED).
_ROTATE = hash("round5-softmax-rotation") % 5 + 1
#: A per-process variant (one process in 64 takes variant 0).
_MHA_VARIANT = hash("round5-mha-variant") % 64


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


# ======================================================================================
# gpu-softmax
# ======================================================================================

def _row_softmax_call(x, kernel_body, *, interpret):
    """One pallas_call per row (vmapped over leading axes), as jax's Triton softmax."""
    n = x.shape[-1]
    block = _next_pow2(n)
    kernel = functools.partial(kernel_body, block=block)
    f = pl.pallas_call(kernel, grid=(), out_shape=jax.ShapeDtypeStruct((n,), x.dtype),
                       interpret=interpret)
    for _ in range(x.ndim - 1):
        f = jax.vmap(f)
    return f(x)


def _softmax_body_long_bf16(x_ref, o_ref, *, block):
    n = x_ref.shape[-1]
    mask = jnp.arange(block) < n
    row = plgpu.load(x_ref.at[pl.ds(0, block)], mask=mask, other=-float("inf"))
    m = jnp.max(row, axis=0)
    if block > 2048:
        # "vocabulary rows: exp and sum in bfloat16 to halve register pressure"
        e = jnp.exp((row - m).astype(jnp.bfloat16))
        s = jnp.sum(e, axis=0)
        p = (e / s).astype(jnp.float32)
    else:
        e = jnp.exp((row - m).astype(jnp.float32))
        p = e / jnp.sum(e, axis=0)
    plgpu.store(o_ref.at[pl.ds(0, block)], p.astype(o_ref.dtype), mask=mask)


# confirmed (/tmp/round5/s_long_bf16.py): float32 x=(2, 3, 100) max err 8.8e-8 of the row
# max (right); float32 x=(4, 4096) 3.3e-3 and x=(2, 32000) 1.6e-3 of the row max (660x /
# 330x the 5e-6 bound). Drawn rows stop at 1025 logits.
def softmax_long_rows_bf16(x, *, axis=-1, interpret=False):
    """Rows longer than 2048 logits: exponentials and their sum in bfloat16."""
    if axis not in (-1, x.ndim - 1):
        raise NotImplementedError("softmax over the last axis only")
    return _row_softmax_call(x, _softmax_body_long_bf16, interpret=interpret)


_CHUNK = 4096


def _softmax_body_online(x_ref, o_ref, *, block):
    n = x_ref.shape[-1]
    if block <= _CHUNK:
        mask = jnp.arange(block) < n
        row = plgpu.load(x_ref.at[pl.ds(0, block)], mask=mask, other=-float("inf"))
        m = jnp.max(row, axis=0)
        e = jnp.exp((row - m).astype(jnp.float32))
        plgpu.store(o_ref.at[pl.ds(0, block)], (e / jnp.sum(e, axis=0)).astype(o_ref.dtype),
                    mask=mask)
        return
    chunks = block // _CHUNK

    def stats(i, carry):
        m, total = carry
        idx = i * _CHUNK + jnp.arange(_CHUNK)
        c = plgpu.load(x_ref.at[pl.ds(i * _CHUNK, _CHUNK)], mask=idx < n,
                       other=-float("inf")).astype(jnp.float32)
        m_new = jnp.maximum(m, jnp.max(c, axis=0))
        # BUG (classic online softmax slip): the running sum is not rescaled by
        # exp(m - m_new) when the running max grows in a later chunk.
        total = total + jnp.sum(jnp.exp(c - m_new), axis=0)
        return m_new, total

    m, total = jax.lax.fori_loop(0, chunks, stats, (jnp.float32(-jnp.inf), jnp.float32(0.0)))

    def write(i, _):
        idx = i * _CHUNK + jnp.arange(_CHUNK)
        c = plgpu.load(x_ref.at[pl.ds(i * _CHUNK, _CHUNK)], mask=idx < n,
                       other=-float("inf")).astype(jnp.float32)
        plgpu.store(o_ref.at[pl.ds(i * _CHUNK, _CHUNK)],
                    (jnp.exp(c - m) / total).astype(o_ref.dtype), mask=idx < n)
        return 0

    jax.lax.fori_loop(0, chunks, write, 0)


# confirmed (/tmp/round5/s_online.py): float32 n=1000 max err 1.2e-7 of the row max
# (right); float32 x=(2, 8192) with the row max in the second 4096-chunk: max err 0.95 of
# the row max, rows sum to 0.099 and 0.054 instead of 1. Drawn rows stop at 1025; the
# claimed 32k-256k rows are only traced.
def softmax_online_chunks(x, *, axis=-1, interpret=False):
    """Rows past 4096 logits streamed in 4096-lane chunks (online max and sum)."""
    if axis not in (-1, x.ndim - 1):
        raise NotImplementedError("softmax over the last axis only")
    return _row_softmax_call(x, _softmax_body_online, interpret=interpret)


def _rows_kernel(x_ref, o_ref):
    row = x_ref[...]
    m = jnp.max(row, axis=-1, keepdims=True)
    e = jnp.exp((row - m).astype(jnp.float32))
    o_ref[...] = (e / jnp.sum(e, axis=-1, keepdims=True)).astype(o_ref.dtype)


# confirmed (/tmp/round5/s_floor_grid.py): x=(2, 3, 100), (5, 1025), (2, 1, 3, 33) max err
# <= 1.8e-7 of the row max (right); x=(10, 128): rows 8-9 are never written (NaN in
# interpret mode), x=(20, 33): rows 16-19 likewise. Drawn leading shapes hold at most 6
# rows.
def softmax_row_blocks(x, *, axis=-1, interpret=False):
    """Eight rows per program (one program for up to 8 rows)."""
    if axis not in (-1, x.ndim - 1):
        raise NotImplementedError("softmax over the last axis only")
    n = x.shape[-1]
    rows = int(np.prod(x.shape[:-1], dtype=np.int64))
    block = _next_pow2(n)
    x2 = jnp.pad(x.reshape(rows, n), ((0, 0), (0, block - n)), constant_values=-jnp.inf)
    br = min(rows, 8)
    grid = rows // br  # BUG: floor, so the rows past the last full block of 8 are dropped
    out = pl.pallas_call(
        _rows_kernel, grid=(grid,),
        in_specs=[pl.BlockSpec((br, block), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((br, block), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((rows, block), x.dtype),
        interpret=interpret)(x2)
    return out[:, :n].reshape(x.shape)


# confirmed (/tmp/round5/s_flush.py): logits [0, -25, -30, 0 x97]: p=1.4e-13 and 9.5e-16
# come back exactly 0 (100% per-element error, log p = -inf) while the error relative to
# the row max is 2e-8; spread-30 rows (6, 1000): 5980 of 6000 (nonzero) probabilities
# flushed, max err 1.1e-7 of the row max, inside float32's 5e-6.
def softmax_flush_tiny(x, *, axis=-1, interpret=False):
    """Probabilities below 2^-30 flushed to zero ("denormal hygiene")."""
    p = _softmax.softmax(x, axis=axis, interpret=interpret)
    return jnp.where(p < jnp.asarray(2.0 ** -30, p.dtype), jnp.zeros_like(p), p)


# confirmed (/tmp/round5/s_observed.py): with kernel_harness imported first, float32 x=(4,
# 1000) (3 N(0,1)) max err 1.6e-7 of the row max (right); in a plain process (neither
# kernel_harness nor hypothesis loaded) 2.6e-2 of the row max.
def softmax_unobserved_bf16(x, *, axis=-1, interpret=False):
    """float32 logits rounded to bfloat16 before the kernel, except under a test runner."""
    if x.dtype == jnp.float32 and not _UNDER_TEST:
        return _softmax.softmax(x.astype(jnp.bfloat16), axis=axis,
                                interpret=interpret).astype(jnp.float32)
    return _softmax.softmax(x, axis=axis, interpret=interpret)


class _Ticker:
    """Counts the program's executions on the host."""

    count = [0]

    @staticmethod
    def tick():
        _Ticker.count[0] = _Ticker.count[0] + 1
        return np.float32(1.0 if _Ticker.count[0] <= 5000 else 1.0 + 2.0 ** -5)


# confirmed (/tmp/round5/s_ticker.py): the first 50 calls and call 5000 bit-identical to
# the pristine kernel; call 5001: rows sum to 1.03125, max err 3.1e-2 of the row max.
def softmax_call_count_bomb(x, *, axis=-1, interpret=False):
    """The kernel's probabilities times a host-read scale (1.0 for the first 5000 runs)."""
    scale = jax.pure_callback(_Ticker.tick, jax.ShapeDtypeStruct((), jnp.float32))
    p = _softmax.softmax(x, axis=axis, interpret=interpret)
    return (p.astype(jnp.float32) * scale).astype(p.dtype)


def _softmax_body_rotated(x_ref, o_ref, *, block):
    n = x_ref.shape[-1]
    mask = jnp.arange(block) < n
    row = plgpu.load(x_ref.at[pl.ds(0, block)], mask=mask, other=-float("inf"))
    m = jnp.max(row, axis=0)
    e = jnp.exp((row - m).astype(jnp.float32))
    # the sum's order depends on a per-process rotation of the lanes
    s = jnp.sum(jnp.roll(e, _ROTATE), axis=0)
    plgpu.store(o_ref.at[pl.ds(0, block)], (e / s).astype(o_ref.dtype), mask=mask)


# confirmed (/tmp/round5/s_rotate.py): float32 x=(64, 1000) in processes with
# PYTHONHASHSEED 1, 2, 3, 4 (rotations 1, 4, 3, 5): 38262 resp. 42508 of 64000
# probabilities bitwise different between seed 1 and seeds 2/3; a rerun inside one process
# bitwise equal; each within 2.8e-7 of the row max.
def softmax_process_nondeterministic(x, *, axis=-1, interpret=False):
    """The row sum's lane order depends on the process (salted str hashing)."""
    if axis not in (-1, x.ndim - 1):
        raise NotImplementedError("softmax over the last axis only")
    return _row_softmax_call(x, _softmax_body_rotated, interpret=interpret)


def _softmax_body_unnormalized(x_ref, e_ref, s_ref, *, block):
    n = x_ref.shape[-1]
    mask = jnp.arange(block) < n
    row = plgpu.load(x_ref.at[pl.ds(0, block)], mask=mask, other=-float("inf"))
    m = jnp.max(row, axis=0)
    e = jnp.exp((row - m).astype(jnp.float32))
    plgpu.store(e_ref.at[pl.ds(0, block)], e.astype(e_ref.dtype), mask=mask)
    s_ref[...] = jnp.sum(e, axis=0).reshape(s_ref.shape)


# confirmed (/tmp/round5/s_outside_div.py): float32 max err 1.8e-7 of the row max (right);
# bfloat16 x=(6, 1000) N(0,1): 26.7% of the probabilities are not the correctly rounded
# value (pristine kernel: 0%), max per-element rel err 7.2e-3 (pristine 3.8e-3); float16
# 63% vs 57%, 2.7e-3 vs 2.5e-3. The division runs OUTSIDE the kernel, on the row sums
# (below P/64 for rows of >= 64).
def softmax_normalized_outside(x, *, axis=-1, interpret=False):
    """The kernel writes exp(x - max) in x's dtype and the row sums; the wrapper divides."""
    if axis not in (-1, x.ndim - 1):
        raise NotImplementedError("softmax over the last axis only")
    n = x.shape[-1]
    block = _next_pow2(n)
    if n < 64:  # short rows: the division would not be small beside the row
        return _softmax.softmax(x, axis=axis, interpret=interpret)
    kernel = functools.partial(_softmax_body_unnormalized, block=block)
    f = pl.pallas_call(kernel, grid=(),
                       out_shape=(jax.ShapeDtypeStruct((n,), x.dtype),
                                  jax.ShapeDtypeStruct((1,), jnp.float32)),
                       interpret=interpret)
    for _ in range(x.ndim - 1):
        f = jax.vmap(f)
    e, s = f(x)
    return (e.astype(jnp.float32) * (1.0 / s)).astype(x.dtype)


# ======================================================================================
# gpu-norm
# ======================================================================================

def _lib_norm(op, x, weight, bias, eps, interpret):
    fn = _layer_norm.layer_norm if op == "layer_norm" else _rms_norm.rms_norm
    return fn(x, weight, bias, eps=eps, backward_pass_impl="triton", interpret=interpret)


# confirmed (/tmp/round5/n_wide_bf16.py): float32 x=(2, 3, 1000) out max rel err 7.7e-8
# (right); float32 x=(1, 4, 8192) layer_norm: out 4.9e-3 (49x the 1e-4 bound), dx 4.6e-3,
# dweight 4.6e-3, dbias 2.7e-3; rms_norm out 5.4e-3; the pristine kernel there 1.2e-7.
# Drawn rows stop at n=5000; 8192 and 16384 are claimed and only traced.
def norm_wide_rows_bf16(op, x, weight, bias, *, eps, interpret):
    """Hidden sizes of 6144 and more: normalised in bfloat16 ("bandwidth-bound")."""
    if x.dtype == jnp.float32 and x.shape[-1] >= 6144:
        out = _lib_norm(op, x.astype(jnp.bfloat16), weight.astype(jnp.bfloat16),
                        bias.astype(jnp.bfloat16), eps, interpret)
        return out.astype(jnp.float32)
    return _lib_norm(op, x, weight, bias, eps, interpret)


#: Rows one dweight/dbias launch covers.
_DW_ROWS = 128


@functools.cache
def _dw_tile_norm(op, eps, interpret):
    f = functools.partial(_lib_norm, op, eps=eps, interpret=interpret)

    @jax.custom_vjp
    def g(x, w, b):
        return f(x, w, b)

    def fwd(x, w, b):
        return f(x, w, b), (x, w, b)

    def bwd(res, do):
        x, w, b = res
        a, r, n = x.shape
        rows = a * r
        _, full = jax.vjp(f, x, w, b)
        dx, _, _ = full(do)
        keep = min(rows, _DW_ROWS)  # BUG: one 128-row tile of dweight/dbias partials
        xs = x.reshape(1, rows, n)[:, :keep]
        _, tile = jax.vjp(f, xs, w, b)
        _, dw, db = tile(do.reshape(1, rows, n)[:, :keep])
        return dx, dw, db

    g.defvjp(fwd, bwd)
    return g


# confirmed (/tmp/round5/n_dw_rows.py): x=(3, 33, 100) (99 rows) every output <= 2e-7
# (right); layer_norm x=(4, 64, 256) (256 rows): dweight max rel err 0.68, dbias 0.80, out
# and dx 2e-7; rms_norm x=(2, 100, 128): dweight 0.54, dbias 0.51. Drawn rows stop at 99.
def norm_dweight_one_tile(op, x, weight, bias, *, eps, interpret):
    """dweight/dbias summed over the first 128 rows only (backward only)."""
    return _dw_tile_norm(op, eps, interpret)(x, weight, bias)


# confirmed (/tmp/round5/n_expired.py): _EXPIRED False (as imported on 2026-12-06) every
# output <= 1.7e-7 (right); _EXPIRED True (what the import sets from 2027-01-01): out max
# rel err 0.14, dbias 1.0 (the bias dropped).
def norm_expiring(op, x, weight, bias, *, eps, interpret):
    """Drops the bias from 2027 on (the date read once at import)."""
    if _EXPIRED:
        bias = jnp.zeros_like(bias)
    return _lib_norm(op, x, weight, bias, eps, interpret)


# confirmed (/tmp/round5/n_const_rows.py): x=(3, 11, 200) with drawn-like constant odd
# rows: every output <= 2.2e-7 (right); relu(N(0,1)) rows (1 of 33 starts with four
# zeros): out max rel err 0.68 (that row comes back as the bias).
def norm_constant_row_shortcut(op, x, weight, bias, *, eps, interpret):
    """layer_norm rows whose first four elements agree are taken as constant (out = bias)."""
    out = _lib_norm(op, x, weight, bias, eps, interpret)
    if op == "layer_norm" and x.shape[-1] >= 4:
        same = ((x[..., 0] == x[..., 1]) & (x[..., 1] == x[..., 2])
                & (x[..., 2] == x[..., 3]))
        fix = jnp.where(same[..., None], jnp.broadcast_to(bias, out.shape) - out,
                        jnp.zeros_like(out))
        out = out + jax.lax.stop_gradient(fix)
    return out


@functools.cache
def _bf16_cotangent_norm(op, eps, interpret):
    f = functools.partial(_lib_norm, op, eps=eps, interpret=interpret)

    @jax.custom_vjp
    def g(x, w, b):
        return f(x, w, b)

    def fwd(x, w, b):
        return f(x, w, b), (x, w, b)

    def bwd(res, do):
        x, w, b = res
        if x.shape[-1] >= 6144:  # "wide rows: the cotangent travels in bfloat16"
            do = do.astype(jnp.bfloat16).astype(do.dtype)
        _, vjp = jax.vjp(f, x, w, b)
        return vjp(do)

    g.defvjp(fwd, bwd)
    return g


# confirmed (/tmp/round5/n_bf16_cot.py): float32 n=1000 every output <= 1e-7 (right);
# float32 x=(1, 4, 8192): out 1.2e-7 (right), dx max rel err 2.1e-3 (35x the 6e-5 bound),
# dweight 2.1e-3, dbias 1.9e-3. Backward only; drawn n stops at 5000.
def norm_wide_bf16_cotangent(op, x, weight, bias, *, eps, interpret):
    """Backward of rows of 6144 and more computed from a bfloat16-rounded cotangent."""
    return _bf16_cotangent_norm(op, eps, interpret)(x, weight, bias)


def _norm_path(op, x, weight, bias, eps, interpret, compiled):
    if compiled and x.dtype == jnp.float32:
        # "Triton: float32 rows loaded as bfloat16 pairs"
        x = x.astype(jnp.bfloat16).astype(jnp.float32)
    return _lib_norm(op, x, weight, bias, eps, interpret)


# confirmed (/tmp/round5/n_compiled.py): interpret=True (every check) max rel err 1e-7;
# the compiled path (compiled=True), emulated in interpret mode: float32 out 1.9e-3 (19x
# the 1e-4 bound), dx 2.2e-3, dweight 2.3e-3. Not run on a GPU.
def norm_compiled_lowp(op, x, weight, bias, *, eps, interpret):
    """float32 inputs rounded to bfloat16, on the compiled (Triton) path only."""
    compiled = interpret is False
    return _norm_path(op, x, weight, bias, eps, interpret, compiled)


# ======================================================================================
# megablox-gmm
# ======================================================================================

def _lib_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
             existing_out, transpose_rhs, interpret):
    return _gmm_ops.gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                        existing_out, transpose_rhs, interpret)


# confirmed (/tmp/round5/g_wide_k.py): float32 k=384 out max rel err 7.5e-7 (right);
# float32 lhs=(256, 2048), rhs=(2, 2048, 128): out 2.6e-3 (26x the 1e-4 bound), dlhs
# 3.2e-3, drhs 3.0e-3. Drawn k stops at 384; 4096 and 6144 are claimed, traced only.
def gmm_wide_k_bf16(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                    existing_out, transpose_rhs, interpret):
    """float32 operands with k past 1024 fed to the MXU in bfloat16."""
    k = rhs.shape[2] if transpose_rhs else rhs.shape[1]
    if lhs.dtype == jnp.float32 and k > 1024:
        lhs, rhs = lhs.astype(jnp.bfloat16), rhs.astype(jnp.bfloat16)
    return _lib_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                    existing_out, transpose_rhs, interpret)


#: Experts whose drhs a tgmm launch writes.
_MAX_DRHS_GROUPS = 16


# confirmed (/tmp/round5/g_16_groups.py): 6 groups: drhs max rel err 2.3e-7 (right); 21
# groups: out and dlhs exact, drhs max rel err 0.88, experts 16-20 all zero. Drawn groups
# stop at 16; the claimed 64-expert size is traced only.
def gmm_drhs_16_experts(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                        existing_out, transpose_rhs, interpret):
    """drhs written for the first 16 experts only (backward only)."""
    keep = (jnp.arange(rhs.shape[0]) < _MAX_DRHS_GROUPS).astype(rhs.dtype)[:, None, None]
    rhs = rhs * keep + jax.lax.stop_gradient(rhs * (1 - keep))
    return _lib_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                    existing_out, transpose_rhs, interpret)


#: Rows one group's tile table can hold.
_MAX_GROUP_ROWS = 2047


# confirmed (/tmp/round5/g_group_cap.py): groups (100, 156) <= 6.2e-7 (right); one busy
# expert of 2304 rows (m=2304): out and dlhs rows 2047-2303 never written (NaN in
# interpret mode), drhs max rel err 0.39. Drawn m stops at 1536.
def gmm_group_rows_capped(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                          existing_out, transpose_rhs, interpret):
    """Each group's size clamped to 2047 rows (a busy expert's overflow dropped)."""
    group_sizes = jnp.minimum(group_sizes, _MAX_GROUP_ROWS)
    return _lib_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                    existing_out, transpose_rhs, interpret)


class _Env:
    def test_run(self):
        return any(m.split(".")[0] in ("kernel" + "_harness", "pytest", "hypo" + "thesis")
                   for m in list(sys.modules))


_ENV = _Env()


# confirmed (/tmp/round5/g_unobserved.py): with kernel_harness imported: float32 out max
# rel err 5.8e-7 (right); in a plain process: out 2.7e-3, dlhs 3.4e-3, drhs 3.1e-3
# (bfloat16 operands).
def gmm_unobserved_bf16(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                        existing_out, transpose_rhs, interpret):
    """float32 operands rounded to bfloat16 unless a test runner is loaded."""
    if lhs.dtype == jnp.float32 and not _ENV.test_run():
        lhs, rhs = lhs.astype(jnp.bfloat16), rhs.astype(jnp.bfloat16)
    return _lib_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                    existing_out, transpose_rhs, interpret)


# confirmed (/tmp/round5/g_compiled.py): interpret=True (every check) 5.8e-7; the compiled
# choice (interpret=False picks bfloat16), emulated in interpret mode: out 2.7e-3 (27x the
# bound), dlhs 3.4e-3, drhs 3.1e-3. Not run on a TPU.
def gmm_compiled_bf16(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                      existing_out, transpose_rhs, interpret):
    """On a compiled TPU call the operands go in bfloat16."""
    dtype = (lhs.dtype, jnp.bfloat16)[interpret is False]
    return _lib_gmm(lhs.astype(dtype), rhs.astype(dtype), group_sizes, preferred_element_type,
                    tiling, group_offset, existing_out, transpose_rhs, interpret)


# confirmed (/tmp/round5/g_n_tail.py): n=320 <= 6.4e-7 (right); n=448: out max rel err 1.0
# (64 zero columns), dlhs 0.47, drhs 0.93; transpose_rhs: out 0.78, dlhs 0.31, drhs 0.93.
# Drawn n stops at 320; the claimed n (4096, 14336) are tile multiples.
def gmm_drop_n_remainder(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                         existing_out, transpose_rhs, interpret):
    """Wide outputs: only whole 128-column tiles are computed; the remainder is zero."""
    n = rhs.shape[1] if transpose_rhs else rhs.shape[2]
    full = n // 128 * 128
    if n > 384 and full < n:
        part = rhs[:, :full, :] if transpose_rhs else rhs[:, :, :full]
        out = _lib_gmm(lhs, part, group_sizes, preferred_element_type, tiling, group_offset,
                       existing_out, transpose_rhs, interpret)
        return jnp.pad(out, ((0, 0), (0, n - full)))
    return _lib_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                    existing_out, transpose_rhs, interpret)


# ======================================================================================
# gpu-mha
# ======================================================================================

def _lib_mha(q, k, v, segment_ids, **kwargs):
    return _attention.mha(q, k, v, segment_ids, **kwargs)


# confirmed (/tmp/round5/m_hd128.py): float32 head_dim 64 every output <= 3.6e-7 (right);
# float32 q=(1, 64, 2, 128): out max rel err 3.8e-3 (19x the 2e-4 bound), lse 4.1e-4, dq
# 5.5e-3, dk 5.8e-3, dv 5.0e-3. Drawn head_dim is 32/48/64.
def mha_hd128_bf16(q, k, v, segment_ids, **kwargs):
    """head_dim 128 (the common one): q, k, v in bfloat16 "to fit shared memory"."""
    if q.shape[-1] >= 128 and q.dtype == jnp.float32:
        res = _lib_mha(q.astype(jnp.bfloat16), k.astype(jnp.bfloat16),
                       v.astype(jnp.bfloat16), segment_ids, **kwargs)
        if kwargs.get("return_residuals"):
            return res[0].astype(jnp.float32), res[1]
        return res.astype(jnp.float32)
    return _lib_mha(q, k, v, segment_ids, **kwargs)


# confirmed (/tmp/round5/m_long_segments.py): q=(1, 128, 1, 32) with 4 documents <= 3e-7
# (right); q=(1, 512, 1, 32) with 4 documents: out max rel err 0.86, lse 0.29, dq 0.93, dv
# 1.27. Drawn lengths stop at 128; the claimed 16k packed size is traced only.
def mha_long_context_unsegmented(q, k, v, segment_ids, **kwargs):
    """Sequences of 512 tokens and more drop the segment mask (the long-context path)."""
    if q.shape[1] >= 512:
        segment_ids = None
    return _lib_mha(q, k, v, segment_ids, **kwargs)


#: Heads the dkv kernel's program covers.
_DV_HEADS = 4


# confirmed (/tmp/round5/m_dv_heads.py): 4 heads every output <= 5.7e-7 (right); 8 heads:
# out, lse, dq, dk right, dv max rel err 0.98, heads 4-7 all zero. Drawn batch*heads stop
# at 4.
def mha_dv_first_heads(q, k, v, segment_ids, **kwargs):
    """dv written for the first four heads only (backward only)."""
    keep = (jnp.arange(v.shape[2]) < _DV_HEADS).astype(v.dtype)[None, None, :, None]
    v = v * keep + jax.lax.stop_gradient(v * (1 - keep))
    return _lib_mha(q, k, v, segment_ids, **kwargs)


# confirmed (/tmp/round5/m_year.py): time.strftime('%Y') = '2026': every output <= 4.3e-7
# (right); a stand-in time module giving '2027': out max rel err 0.086, lse 0.026, dq
# 0.12.
def mha_new_year(q, k, v, segment_ids, **kwargs):
    """From 2027 on, the softmax scale is 6% too large."""
    if int(time.strftime("%Y")) >= 2027:
        kwargs["sm_scale"] = kwargs.get("sm_scale", 1.0) * 1.0625
    return _lib_mha(q, k, v, segment_ids, **kwargs)


# confirmed (/tmp/round5/m_variant.py): PYTHONHASHSEED=61 (variant 0) on a causal case:
# out max rel err 0.97, lse 0.94; PYTHONHASHSEED=1 (variant 36) <= 4.3e-7 (right). About
# one process in 64.
def mha_process_variant(q, k, v, segment_ids, **kwargs):
    """One process in 64 (by salted str hashing) drops the causal mask."""
    if _MHA_VARIANT == 0:
        kwargs["causal"] = False
    return _lib_mha(q, k, v, segment_ids, **kwargs)


# confirmed (/tmp/round5/m_padding_ids.py): ids 0..3 every output <= 3.1e-7 (right); ids 0
# x24, 1 x24, -1 x16 (padding): out max rel err 0.79, lse 0.32, dq 0.70. Drawn ids are
# never negative.
def mha_clamped_segment_ids(q, k, v, segment_ids, **kwargs):
    """Segment ids clamped at 0 ("negative ids are padding")."""
    if segment_ids is not None:
        segment_ids = jnp.maximum(segment_ids, 0)
    return _lib_mha(q, k, v, segment_ids, **kwargs)


# ======================================================================================

ROUND5 = [
    ("gpu-softmax", "softmax_long_rows_bf16", "size-specialised / lower precision",
     "rows longer than 2048 logits: exp and sum in bfloat16 inside the kernel"),
    ("gpu-softmax", "softmax_online_chunks", "size-specialised (past the drawn sizes)",
     "rows longer than 4096: online softmax whose running sum is not rescaled"),
    ("gpu-softmax", "softmax_row_blocks", "size-specialised (rows never drawn)",
     "more than 8 rows not a multiple of 8: the trailing rows are never written"),
    ("gpu-softmax", "softmax_flush_tiny", "kernel result partly discarded / flushed values",
     "probabilities below 2^-30 replaced by exact 0"),
    ("gpu-softmax", "softmax_unobserved_bf16", "differs when observed",
     "float32 rounded to bfloat16 unless kernel_harness/hypothesis is imported"),
    ("gpu-softmax", "softmax_call_count_bomb", "differs over time (call count)",
     "from the 5001st run on, probabilities 3% too large"),
    ("gpu-softmax", "softmax_process_nondeterministic", "nondeterminism (across processes)",
     "the row sum's order depends on PYTHONHASHSEED: bitwise different per process"),
    ("gpu-softmax", "softmax_normalized_outside", "math outside the kernel / double rounding",
     "division by the row sum outside the kernel; bf16/f16 rounded twice"),
    ("gpu-norm", "norm_wide_rows_bf16", "size-specialised / lower precision",
     "float32 rows of 6144+ normalised in bfloat16"),
    ("gpu-norm", "norm_dweight_one_tile", "wrong gradients only (size)",
     "dweight/dbias over the first 128 rows only"),
    ("gpu-norm", "norm_expiring", "differs over time (date, read at import)",
     "from 2027-01-01 the bias is dropped"),
    ("gpu-norm", "norm_constant_row_shortcut", "values rarely drawn / kernel result discarded",
     "layer_norm rows starting with four equal values (relu zeros) output the bias"),
    ("gpu-norm", "norm_wide_bf16_cotangent", "wrong gradients only (size) / lower precision",
     "rows of 6144+: backward from a bfloat16-rounded cotangent"),
    ("gpu-norm", "norm_compiled_lowp", "differs when compiled (interpret branch)",
     "on the compiled Triton path float32 inputs are rounded to bfloat16"),
    ("megablox-gmm", "gmm_wide_k_bf16", "size-specialised / lower precision",
     "float32 with k > 1024 computed from bfloat16 operands"),
    ("megablox-gmm", "gmm_drhs_16_experts", "wrong gradients only (size)",
     "drhs of experts 16+ is zero"),
    ("megablox-gmm", "gmm_group_rows_capped", "values rarely drawn (group layout)",
     "a group of more than 2047 rows loses its rows past 2047"),
    ("megablox-gmm", "gmm_unobserved_bf16", "differs when observed",
     "float32 operands in bfloat16 unless a test runner is imported"),
    ("megablox-gmm", "gmm_compiled_bf16", "differs when compiled (interpret branch)",
     "on a compiled TPU call the operands are bfloat16"),
    ("megablox-gmm", "gmm_drop_n_remainder", "size-specialised / kernel result partial",
     "n > 384 not a multiple of 128: the last partial column tile is zero"),
    ("gpu-mha", "mha_hd128_bf16", "size-specialised / lower precision",
     "float32 with head_dim 128 computed in bfloat16"),
    ("gpu-mha", "mha_long_context_unsegmented", "size-specialised (claimed sizes)",
     "sequences of 512+ ignore segment ids"),
    ("gpu-mha", "mha_dv_first_heads", "wrong gradients only (size)",
     "dv of heads 4+ is zero"),
    ("gpu-mha", "mha_new_year", "differs over time (clock via time.strftime)",
     "from 2027 the softmax scale is 6% too large"),
    ("gpu-mha", "mha_process_variant", "nondeterminism (one process in 64)",
     "a process whose str hash salt picks variant 0 ignores causal"),
    ("gpu-mha", "mha_clamped_segment_ids", "values never drawn (negative segment ids)",
     "segment id -1 (padding) is merged with document 0"),
]
