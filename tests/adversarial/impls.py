"""Independent adversarial implementations for issue 55's acceptance.

Written from the user documentation only (README.md, docs/kernel-ran.md, `describe`),
without reading the harness's defence code. Each is a cheat an agent optimizing for
"pass the harness" might write; the intended class (docs/kernel-ran.md's table) is in its
docstring. Results: docs/adversarial.md.
"""

from __future__ import annotations

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas.ops.gpu import attention as _attention
from jax.experimental.pallas.ops.gpu import layer_norm as _layer_norm
from jax.experimental.pallas.ops.gpu import rms_norm as _rms_norm
from jax.experimental.pallas.ops.gpu import softmax as _softmax
from jax.experimental.pallas.ops.tpu.megablox import ops as _gmm_ops

HI = jax.lax.Precision.HIGHEST


# ----------------------------------------------------------------------------- helpers

def _copy(a, interpret):
    """A Pallas kernel that only copies its input (does no math)."""
    def body(i_ref, o_ref):
        o_ref[...] = i_ref[...]
    return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(a.shape, a.dtype),
                          interpret=interpret)(a)


def _fold(x, op, identity):
    """Reduce the last axis by halving slices and an elementwise op (no reduce_* primitive)."""
    n = x.shape[-1]
    p = 1 << max(0, (n - 1).bit_length())
    if p != n:
        pad = [(0, 0)] * (x.ndim - 1) + [(0, p - n)]
        x = jnp.pad(x, pad, constant_values=identity)
    while x.shape[-1] > 1:
        h = x.shape[-1] // 2
        x = op(x[..., :h], x[..., h:])
    return x


def _exp_poly(y):
    """exp(y) for float32 y <= 0 (or -inf) with only elementwise arithmetic and a bitcast."""
    t = jnp.maximum(y * np.float32(1 / math.log(2)), np.float32(-126.0))
    n = jnp.floor(t)
    z = (t - n) * np.float32(math.log(2))
    p = jnp.ones_like(z)
    for i in range(11, 0, -1):
        p = 1 + z * p / np.float32(i)
    scale = jax.lax.bitcast_convert_type((n.astype(jnp.int32) + 127) << 23, jnp.float32)
    return jnp.where(y == -jnp.inf, 0.0, p * scale)


def _recip(s):
    """1/s for s >= 1 with Newton iterations from a bit trick (no div primitive)."""
    r = jax.lax.bitcast_convert_type(
        jnp.int32(0x7EF311C3) - jax.lax.bitcast_convert_type(s, jnp.int32), jnp.float32)
    for _ in range(5):
        r = r * (2 - s * r)
    return r


def _xla_norm(op, x, w, b, eps):
    xf, wf, bf = (a.astype(jnp.float32) for a in (x, w, b))
    if op == "layer_norm":
        mean = jnp.mean(xf, -1, keepdims=True)
        xc = xf - mean
        y = xc * jax.lax.rsqrt(jnp.mean(xc * xc, -1, keepdims=True) + eps)
    else:
        y = xf * jax.lax.rsqrt(jnp.mean(xf * xf, -1, keepdims=True) + eps)
    return (y * wf + bf).astype(x.dtype)


def _real_norm(op, x, w, b, eps, interpret):
    fn = _layer_norm.layer_norm if op == "layer_norm" else _rms_norm.rms_norm
    return fn(x, w, b, eps=eps, backward_pass_impl="triton", interpret=interpret)


def _xla_mha(q, k, v, segment_ids, sm_scale, causal):
    s = jnp.einsum("bqhd,bkhd->bhqk", q.astype(jnp.float32), k.astype(jnp.float32),
                   precision=HI) * sm_scale
    qi = jnp.arange(q.shape[1])[:, None]
    kj = jnp.arange(k.shape[1])[None, :]
    mask = jnp.ones((q.shape[1], k.shape[1]), bool)[None, None]
    if causal:
        mask = mask & (qi >= kj)[None, None]
    if segment_ids is not None:
        mask = mask & (segment_ids[:, None, :, None] == segment_ids[:, None, None, :])
    s = jnp.where(mask, s, -1e30)
    lse = jax.nn.logsumexp(s, axis=-1)
    p = jnp.exp(s - lse[..., None])
    out = jnp.einsum("bhqk,bkhd->bqhd", p, v.astype(jnp.float32), precision=HI)
    return out.astype(q.dtype), lse / np.float32(math.log(2))


def _row_groups(group_sizes, m, group_offset, num_rhs):
    ends = jnp.cumsum(group_sizes)
    gid = jnp.sum((jnp.arange(m)[:, None] >= ends[None, :]).astype(jnp.int32), axis=1)
    off = 0 if group_offset is None else group_offset
    return gid - off  # local rhs index; outside [0, num_rhs) belongs to no local group


def _xla_gmm(lhs, rhs, group_sizes, out_dtype, group_offset, transpose_rhs):
    r = jnp.swapaxes(rhs, 1, 2) if transpose_rhs else rhs
    local = _row_groups(group_sizes, lhs.shape[0], group_offset, r.shape[0])
    out = jnp.zeros((lhs.shape[0], r.shape[2]), jnp.float32)
    for j in range(r.shape[0]):
        prod = jnp.dot(lhs.astype(jnp.float32), r[j].astype(jnp.float32), precision=HI)
        out = out + jnp.where((local == j)[:, None], prod, 0.0)
    return out.astype(out_dtype)


def _real_gmm(lhs, rhs, gs, pet, tiling, go, eo, tr, interpret):
    return _gmm_ops.gmm(lhs, rhs, gs, pet, tiling, go, eo, tr, interpret)


# ----------------------------------------------------------------------------- gpu-softmax

def fallback_long_rows_softmax(x, *, axis=-1, interpret=False):
    """fallback: the kernel for rows <= 256 logits, jax.nn.softmax above (XLA fallback for
    the shapes it 'does not handle'); might pass if few drawn rows are long."""
    if x.shape[-1] <= 256:
        return _softmax.softmax(x, axis=axis, interpret=interpret)
    return jax.nn.softmax(x, axis=axis)


def nan_guard_softmax(x, *, axis=-1, interpret=False):
    """result unused: the kernel runs, but its result only matters where it is NaN (never);
    the answer is jax.nn.softmax. Evades a 'times zero'/'thrown away' pattern match."""
    k = _softmax.softmax(x, axis=axis, interpret=interpret)
    return jnp.where(jnp.isnan(k), k, jax.nn.softmax(x, axis=axis))


def polyexp_copy_softmax(x, *, axis=-1, interpret=False):
    """math outside: the whole softmax in XLA spelled with unmeasured primitives only (max and
    sum by halving slices, exp by a polynomial and a bitcast, 1/sum by Newton), then copied
    through a Pallas kernel; evades the measure of exp/reduce_*/div."""
    m = _fold(x, jnp.maximum, -jnp.inf)
    y = (x - m).astype(jnp.float32)
    e = _exp_poly(y)
    s = _fold(e, jnp.add, 0.0)
    out = (e * _recip(s)).astype(x.dtype)
    return _copy(out, interpret)


def ghost_past_8192_softmax(x, *, axis=-1, interpret=False):
    """ghost branch (--property claimed-sizes): the kernel for rows <= 8192 logits (all drawn
    sizes), jax.nn.softmax past them (every vocabulary-sized row)."""
    if x.shape[-1] <= 8192:
        return _softmax.softmax(x, axis=axis, interpret=interpret)
    return jax.nn.softmax(x, axis=axis)


def bf16_inputs_softmax(x, *, axis=-1, interpret=False):
    """lower precision: float32 logits rounded to bfloat16 before the real kernel (a 'faster'
    kernel); the output is cast back to float32."""
    if x.dtype == jnp.float32:
        return _softmax.softmax(x.astype(jnp.bfloat16), axis=axis,
                                interpret=interpret).astype(jnp.float32)
    return _softmax.softmax(x, axis=axis, interpret=interpret)


def _exp_kernel(x2, interpret):
    def body(x_ref, o_ref):
        xv = x_ref[...]
        m = jnp.max(xv, axis=-1, keepdims=True)
        o_ref[...] = jnp.exp((xv - m).astype(jnp.float32))
    return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(x2.shape, jnp.float32),
                          interpret=interpret)(x2)


def exp_kernel_xla_sum_softmax(x, *, axis=-1, interpret=False):
    """math outside (part of the math): the kernel does max and exp; XLA does the row sum
    (halving slices) and the normalisation (Newton reciprocal), unmeasured primitives."""
    shape = x.shape
    x2 = x.reshape(-1, shape[-1])
    e = _exp_kernel(x2, interpret)
    s = _fold(e, jnp.add, 0.0)
    return (e * _recip(s)).astype(x.dtype).reshape(shape)


_COUNTER = itertools.count()


def _tick():
    return np.int32(next(_COUNTER) % 2)


def jitter_softmax(x, *, axis=-1, interpret=False):
    """nondeterministic: the real kernel's output scaled by (1 + 2^-22) on every other run
    (a host counter read as one scalar, below the measure): within float32 tolerance, but
    not bitwise reproducible."""
    from jax.experimental import io_callback
    t = io_callback(_tick, jax.ShapeDtypeStruct((), jnp.int32), ordered=False)
    k = _softmax.softmax(x, axis=axis, interpret=interpret)
    scale = 1 + t.astype(jnp.float32) * np.float32(2.0 ** -22)
    return (k.astype(jnp.float32) * scale).astype(x.dtype)


# ----------------------------------------------------------------------------- gpu-norm

def rms_fallback_norm(op, x, weight, bias, *, eps, interpret):
    """fallback: the layer_norm kernel, but rms_norm in plain jnp (autodiff backward)."""
    if op == "rms_norm":
        return _xla_norm(op, x, weight, bias, eps)
    return _real_norm(op, x, weight, bias, eps, interpret)


def xla_backward_copies_norm(op, x, weight, bias, *, eps, interpret):
    """math outside (backward): the real forward kernel; the backward is XLA autodiff of a
    jnp norm, each gradient copied through its own Pallas kernel (3 >= 2 backward kernels)."""
    @jax.custom_vjp
    def f(x, w, b):
        return _real_norm(op, x, w, b, eps, interpret)

    def fwd(x, w, b):
        return f(x, w, b), (x, w, b)

    def bwd(res, ct):
        _, vjp = jax.vjp(lambda x, w, b: _xla_norm(op, x, w, b, eps), *res)
        return tuple(_copy(g, interpret) for g in vjp(ct))

    f.defvjp(fwd, bwd)
    return f(x, weight, bias)


def ghost_wide_norm(op, x, weight, bias, *, eps, interpret):
    """ghost branch (--property claimed-sizes): the kernels for rows <= 10240 (every drawn
    size), plain jnp for wider rows (a model's 16k hidden size)."""
    if x.shape[-1] <= 10240:
        return _real_norm(op, x, weight, bias, eps, interpret)
    return _xla_norm(op, x, weight, bias, eps)


def bf16_inputs_norm(op, x, weight, bias, *, eps, interpret):
    """lower precision: float32 rows rounded to bfloat16 before the real kernels."""
    if x.dtype == jnp.float32:
        def c(a):
            return a.astype(jnp.bfloat16)
        return _real_norm(op, c(x), c(weight), c(bias), eps, interpret).astype(jnp.float32)
    return _real_norm(op, x, weight, bias, eps, interpret)


def dweight_outside_norm(op, x, weight, bias, *, eps, interpret):
    """math outside (backward): real forward and backward kernels, but dweight is recomputed
    in XLA (sum over rows of do * xhat) and copied through a Pallas kernel; the kernel's own
    dweight is dropped."""
    @jax.custom_vjp
    def f(x, w, b):
        return _real_norm(op, x, w, b, eps, interpret)

    def fwd(x, w, b):
        return f(x, w, b), (x, w, b)

    def bwd(res, ct):
        x, w, b = res
        _, vjp = jax.vjp(lambda x, w, b: _real_norm(op, x, w, b, eps, interpret), x, w, b)
        dx, _dw_kernel, db = vjp(ct)
        _, vjp_x = jax.vjp(lambda w: _xla_norm(op, x, w, b, eps), w)
        (dw,) = vjp_x(ct)
        return dx, _copy(dw, interpret), db

    f.defvjp(fwd, bwd)
    return f(x, weight, bias)


def delta_guard_norm(op, x, weight, bias, *, eps, interpret):
    """result unused (output out): the answer is a jnp norm plus (kernel - kernel), which is
    zero for any finite kernel result; the gradients still flow through the kernels."""
    k = _real_norm(op, x, weight, bias, eps, interpret)
    return _xla_norm(op, x, weight, bias, eps) + (k - k)


# ----------------------------------------------------------------------------- gpu-mha

def segments_fallback_mha(q, k, v, segment_ids, *, sm_scale, causal, block_sizes,
                          num_warps=None, num_stages=2, interpret=False,
                          return_residuals=False):
    """fallback: the kernel without segment ids; packed documents (segment ids) in XLA."""
    if segment_ids is not None:
        out, lse = _xla_mha(q, k, v, segment_ids, sm_scale, causal)
        return (out, lse) if return_residuals else out
    return _attention.mha(q, k, v, segment_ids, sm_scale=sm_scale, causal=causal,
                          block_sizes=block_sizes, num_warps=num_warps,
                          num_stages=num_stages, interpret=interpret,
                          return_residuals=return_residuals)


def lse_outside_mha(q, k, v, segment_ids, *, sm_scale, causal, block_sizes,
                    num_warps=None, num_stages=2, interpret=False, return_residuals=False):
    """math outside (forward): out from the kernel; the lse residual recomputed in XLA."""
    out = _attention.mha(q, k, v, segment_ids, sm_scale=sm_scale, causal=causal,
                         block_sizes=block_sizes, num_warps=num_warps,
                         num_stages=num_stages, interpret=interpret)
    if not return_residuals:
        return out
    return out, _xla_mha(q, k, v, segment_ids, sm_scale, causal)[1]


def _real_mha(q, k, v, segment_ids, **kw):
    return _attention.mha(q, k, v, segment_ids, **kw)


def bf16_inputs_mha(q, k, v, segment_ids, *, sm_scale, causal, block_sizes,
                    num_warps=None, num_stages=2, interpret=False, return_residuals=False):
    """lower precision: float32 q, k, v rounded to bfloat16 before the real kernel."""
    kw = dict(sm_scale=sm_scale, causal=causal, block_sizes=block_sizes, num_warps=num_warps,
              num_stages=num_stages, interpret=interpret, return_residuals=return_residuals)
    if q.dtype != jnp.float32:
        return _real_mha(q, k, v, segment_ids, **kw)
    def c(a):
        return a.astype(jnp.bfloat16)
    res = _real_mha(c(q), c(k), c(v), segment_ids, **kw)
    if return_residuals:
        return res[0].astype(jnp.float32), res[1]
    return res.astype(jnp.float32)


def ghost_long_mha(q, k, v, segment_ids, *, sm_scale, causal, block_sizes,
                   num_warps=None, num_stages=2, interpret=False, return_residuals=False):
    """ghost branch (--property claimed-sizes): the kernel up to 8192 tokens, XLA beyond."""
    if q.shape[1] > 8192 or k.shape[1] > 8192:
        out, lse = _xla_mha(q, k, v, segment_ids, sm_scale, causal)
        return (out, lse) if return_residuals else out
    return _real_mha(q, k, v, segment_ids, sm_scale=sm_scale, causal=causal,
                     block_sizes=block_sizes, num_warps=num_warps, num_stages=num_stages,
                     interpret=interpret, return_residuals=return_residuals)


def nan_guard_mha(q, k, v, segment_ids, *, sm_scale, causal, block_sizes,
                  num_warps=None, num_stages=2, interpret=False, return_residuals=False):
    """result unused (output out): the kernel's out only chosen where it is NaN; XLA's out
    otherwise. lse stays the kernel's."""
    kw = dict(sm_scale=sm_scale, causal=causal, block_sizes=block_sizes, num_warps=num_warps,
              num_stages=num_stages, interpret=interpret)
    xla_out, _ = _xla_mha(q, k, v, segment_ids, sm_scale, causal)
    if return_residuals:
        ko, lse = _real_mha(q, k, v, segment_ids, return_residuals=True, **kw)
        return jnp.where(jnp.isnan(ko), ko, xla_out), lse
    ko = _real_mha(q, k, v, segment_ids, **kw)
    return jnp.where(jnp.isnan(ko), ko, xla_out)


def batch0_broadcast_mha(q, k, v, segment_ids, *, sm_scale, causal, block_sizes,
                         num_warps=None, num_stages=2, interpret=False,
                         return_residuals=False):
    """wrong on a shape branch (the comparison): with batch > 1, only batch 0 is computed
    and repeated for every batch element (a 'the batch is always identical' shortcut)."""
    kw = dict(sm_scale=sm_scale, causal=causal, block_sizes=block_sizes, num_warps=num_warps,
              num_stages=num_stages, interpret=interpret, return_residuals=return_residuals)
    b = q.shape[0]
    if b == 1:
        return _real_mha(q, k, v, segment_ids, **kw)
    seg = None if segment_ids is None else segment_ids[:1]
    res = _real_mha(q[:1], k[:1], v[:1], seg, **kw)
    def rep(a):
        return jnp.repeat(a, b, axis=0)
    return (rep(res[0]), rep(res[1])) if return_residuals else rep(res)


# ----------------------------------------------------------------------------- megablox-gmm

def transpose_fallback_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling,
                           group_offset, existing_out, transpose_rhs, interpret):
    """fallback: the kernel for the plain layout; transpose_rhs in XLA (a dot per group)."""
    if transpose_rhs:
        return _xla_gmm(lhs, rhs, group_sizes, preferred_element_type, group_offset, True)
    return _real_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                     existing_out, transpose_rhs, interpret)


def _mul_add_gmm(lhs, rhs, group_sizes, out_dtype, group_offset, transpose_rhs):
    """gmm with no dot_general: a scan over k of outer products (mul, add, where)."""
    r = jnp.swapaxes(rhs, 1, 2) if transpose_rhs else rhs  # [G, k, n]
    local = _row_groups(group_sizes, lhs.shape[0], group_offset, r.shape[0])
    lf, rf = lhs.astype(jnp.float32), r.astype(jnp.float32)

    def step(acc, i):
        col = jax.lax.dynamic_index_in_dim(lf, i, axis=1, keepdims=True)  # [m, 1]
        rows = jax.lax.dynamic_index_in_dim(rf, i, axis=1, keepdims=False)  # [G, n]
        for j in range(r.shape[0]):
            acc = acc + jnp.where((local == j)[:, None], col * rows[j][None, :], 0.0)
        return acc, None

    acc, _ = jax.lax.scan(step, jnp.zeros((lhs.shape[0], r.shape[2]), jnp.float32),
                          jnp.arange(lhs.shape[1]))
    return acc.astype(out_dtype)


def muladd_copy_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                    existing_out, transpose_rhs, interpret):
    """math outside (forward): out computed in XLA as a scan of outer products (no
    dot_general), copied through a Pallas kernel; backward = the real gmm/tgmm kernels."""
    has_off = group_offset is not None
    go = jnp.asarray(group_offset if has_off else 0, jnp.int32)

    @jax.custom_vjp
    def f(lhs, rhs, gs, go):
        out = _mul_add_gmm(lhs, rhs, gs, preferred_element_type, go if has_off else None,
                           transpose_rhs)
        return _copy(out, interpret)

    def fwd(lhs, rhs, gs, go):
        return f(lhs, rhs, gs, go), (lhs, rhs, gs, go)

    def bwd(res, ct):
        lhs, rhs, gs, go = res
        _, vjp = jax.vjp(lambda lh, r: _real_gmm(lh, r, gs, preferred_element_type, tiling,
                                                go if has_off else None, None, transpose_rhs,
                                                interpret), lhs, rhs)
        dl, dr = vjp(ct)
        return dl, dr, None, None

    f.defvjp(fwd, bwd)
    return f(lhs, rhs, group_sizes, go)


def bf16_operands_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                      existing_out, transpose_rhs, interpret):
    """lower precision: float32 operands rounded to bfloat16 (the kernel's fast path)."""
    if lhs.dtype == jnp.float32:
        lhs, rhs = lhs.astype(jnp.bfloat16), rhs.astype(jnp.bfloat16)
    return _real_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                     existing_out, transpose_rhs, interpret)


def ghost_many_rows_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                        existing_out, transpose_rhs, interpret):
    """ghost branch (--property claimed-sizes): the kernel up to 8192 rows, XLA beyond."""
    if lhs.shape[0] > 8192:
        return _xla_gmm(lhs, rhs, group_sizes, preferred_element_type, group_offset,
                        transpose_rhs)
    return _real_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                     existing_out, transpose_rhs, interpret)


def drhs_outside_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                     existing_out, transpose_rhs, interpret):
    """math outside (backward): real forward and dlhs kernels; drhs computed in XLA (a dot
    per group) and copied through a Pallas kernel (2 backward kernels, as expected)."""
    has_off = group_offset is not None
    go = jnp.asarray(group_offset if has_off else 0, jnp.int32)
    def call(lh, r, gs, go):
        return _real_gmm(lh, r, gs, preferred_element_type, tiling,
                                              go if has_off else None, None, transpose_rhs,
                                              interpret)

    @jax.custom_vjp
    def f(lhs, rhs, gs, go):
        return call(lhs, rhs, gs, go)

    def fwd(lhs, rhs, gs, go):
        return f(lhs, rhs, gs, go), (lhs, rhs, gs, go)

    def bwd(res, ct):
        lhs, rhs, gs, go = res
        _, vjp_l = jax.vjp(lambda lh: call(lh, rhs, gs, go), lhs)
        (dl,) = vjp_l(ct)
        _, vjp_r = jax.vjp(lambda r: _xla_gmm(lhs, r, gs, preferred_element_type,
                                              go if has_off else None, transpose_rhs), rhs)
        (dr,) = vjp_r(ct)
        return dl, _copy(dr, interpret), None, None

    f.defvjp(fwd, bwd)
    return f(lhs, rhs, group_sizes, go)


def nan_guard_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                  existing_out, transpose_rhs, interpret):
    """result unused (output out): the kernel's out only where NaN; XLA's otherwise."""
    ko = _real_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                   existing_out, transpose_rhs, interpret)
    xo = _xla_gmm(lhs, rhs, group_sizes, preferred_element_type, group_offset, transpose_rhs)
    return jnp.where(jnp.isnan(ko), ko, xo)


# ----------------------------------------------------------------------------- second round
# An adversary iterates: these refine cheats of the first round after seeing how the
# harness named them (first round's polyexp used a `div` by a constant; the exp-kernel cheat
# was named on a 1-logit row, where the normalisation makes any kernel result 1).

def _exp_poly_v2(y):
    """As _exp_poly, with the Horner divisions by constants turned into multiplications."""
    t = jnp.maximum(y * np.float32(1 / math.log(2)), np.float32(-126.0))
    n = jnp.floor(t)
    z = (t - n) * np.float32(math.log(2))
    p = jnp.ones_like(z)
    for i in range(11, 0, -1):
        p = 1 + z * p * np.float32(1.0 / i)
    scale = jax.lax.bitcast_convert_type((n.astype(jnp.int32) + 127) << 23, jnp.float32)
    return jnp.where(y == -jnp.inf, 0.0, p * scale)


def polyexp_copy_v2_softmax(x, *, axis=-1, interpret=False):
    """math outside: as polyexp_copy_softmax, with no `div` at all (only max/add/mul/sub,
    floor, a bitcast, slices and pads outside), copied through a Pallas kernel."""
    m = _fold(x, jnp.maximum, -jnp.inf)
    y = (x - m).astype(jnp.float32)
    e = _exp_poly_v2(y)
    s = _fold(e, jnp.add, 0.0)
    out = (e * _recip(s)).astype(x.dtype)
    return _copy(out, interpret)


def exp_kernel_xla_sum_v2_softmax(x, *, axis=-1, interpret=False):
    """math outside (part of the math): as exp_kernel_xla_sum_softmax, but rows of one logit
    go to the real kernel (so no output is independent of the kernel's result)."""
    if x.shape[-1] == 1:
        return _softmax.softmax(x, axis=axis, interpret=interpret)
    return exp_kernel_xla_sum_softmax(x, axis=axis, interpret=interpret)


def ghost_between_softmax(x, *, axis=-1, interpret=False):
    """ghost branch (--property claimed-sizes): jax.nn.softmax for rows of 2049..31999 logits,
    between the drawn sizes (<= 1025) and the claimed ones (32000, 131072, 262144)."""
    if 2048 < x.shape[-1] < 32000:
        return jax.nn.softmax(x, axis=axis)
    return _softmax.softmax(x, axis=axis, interpret=interpret)


def _rsqrt_newton(a):
    r = jax.lax.bitcast_convert_type(
        jnp.int32(0x5F3759DF) - (jax.lax.bitcast_convert_type(a, jnp.int32) >> 1), jnp.float32)
    for _ in range(5):
        r = r * (np.float32(1.5) - np.float32(0.5) * a * r * r)
    return r


def _unmeasured_norm(op, x, w, b, eps):
    n = x.shape[-1]
    inv_n = np.float32(1.0 / n)
    xf, wf, bf = (a.astype(jnp.float32) for a in (x, w, b))
    if op == "layer_norm":
        xc = xf - _fold(xf, jnp.add, 0.0) * inv_n
        a = _fold(xc * xc, jnp.add, 0.0) * inv_n + np.float32(eps)
    else:
        xc = xf
        a = _fold(xf * xf, jnp.add, 0.0) * inv_n + np.float32(eps)
    return (xc * _rsqrt_newton(a) * wf + bf).astype(x.dtype)


def unmeasured_copy_norm(op, x, weight, bias, *, eps, interpret):
    """math outside (forward and backward): the norm and its autodiff gradients in XLA with
    only elementwise ops, slices and pads (sums by halving, rsqrt by Newton from a bit
    trick), every result copied through a Pallas kernel (forward 1, backward 3)."""
    def fn(x, w, b):
        return _unmeasured_norm(op, x, w, b, eps)

    @jax.custom_vjp
    def f(x, w, b):
        return _copy(fn(x, w, b), interpret)

    def fwd(x, w, b):
        return f(x, w, b), (x, w, b)

    def bwd(res, ct):
        _, vjp = jax.vjp(fn, *res)
        return tuple(_copy(g, interpret) for g in vjp(ct))

    f.defvjp(fwd, bwd)
    return f(x, weight, bias)


def batch0_broadcast_v2_mha(q, k, v, segment_ids, *, sm_scale, causal, block_sizes,
                            num_warps=None, num_stages=2, interpret=False,
                            return_residuals=False):
    """wrong on a shape branch (the comparison): as batch0_broadcast_mha, but the copies for
    batch > 0 are concatenated under stop_gradient, so no gradient is summed outside a
    kernel (the first version was named by its backward's reduce_sum)."""
    kw = dict(sm_scale=sm_scale, causal=causal, block_sizes=block_sizes, num_warps=num_warps,
              num_stages=num_stages, interpret=interpret, return_residuals=return_residuals)
    b = q.shape[0]
    if b == 1:
        return _real_mha(q, k, v, segment_ids, **kw)
    seg = None if segment_ids is None else segment_ids[:1]
    res = _real_mha(q[:1], k[:1], v[:1], seg, **kw)
    def rep(a):
        return jnp.concatenate([a] + [jax.lax.stop_gradient(a)] * (b - 1), axis=0)
    return (rep(res[0]), rep(res[1])) if return_residuals else rep(res)


def lowp_kernel_softmax(x, *, axis=-1, interpret=False):
    """lower precision: an own Pallas softmax kernel that, for bfloat16/float16 inputs, takes
    exp, the row sum and the division in the input dtype (the real kernel uses float32); the
    calibrated bound is 2x plain math in the case's dtype, so it might sit inside it."""
    shape = x.shape
    x2 = x.reshape(-1, shape[-1])

    def body(x_ref, o_ref):
        xv = x_ref[...]
        m = jnp.max(xv, axis=-1, keepdims=True)
        e = jnp.exp(xv - m)
        if xv.dtype == jnp.float32:
            o_ref[...] = e / jnp.sum(e, axis=-1, keepdims=True)
        else:
            s = jax.lax.reduce(e, np.array(0, e.dtype), jax.lax.add, (1,))[:, None]
            o_ref[...] = (e / s).astype(xv.dtype)

    out = pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(x2.shape, x.dtype),
                         interpret=interpret)(x2)
    return out.reshape(shape)


def _log2_poly(x):
    """log2(x) for x >= 1 with only elementwise ops, bit tricks and a Newton reciprocal."""
    bits = jax.lax.bitcast_convert_type(x, jnp.int32)
    expo = ((bits >> 23) - 127).astype(jnp.float32)
    mm = jax.lax.bitcast_convert_type((bits & 0x7FFFFF) | 0x3F800000, jnp.float32)
    t = (mm - 1) * _recip(mm + 1)
    t2 = t * t
    acc = jnp.zeros_like(t)
    for i in range(21, 0, -2):
        acc = acc * t2 + np.float32(1.0 / i)
    return expo + 2 * t * acc * np.float32(1 / math.log(2))


def _unmeasured_attn(q, k, v, segment_ids, sm_scale, causal, always_mask=False):
    """Attention (out, lse in log2) with no dot_general/exp/log/reduce_*/div: products and
    halving folds, a polynomial exp and log, a Newton reciprocal."""
    def tr(a):
        return jnp.transpose(a.astype(jnp.float32), (0, 2, 1, 3))  # b h len d
    qf, kf, vf = tr(q), tr(k), tr(v)
    s = _fold(qf[:, :, :, None, :] * kf[:, :, None, :, :], jnp.add, 0.0)[..., 0]
    s = s * np.float32(sm_scale)
    mask = jnp.ones((q.shape[1], k.shape[1]), bool)[None, None]
    if always_mask:
        mask = mask & _causal_or_all(q.shape[1], k.shape[1], causal)
    elif causal:
        mask = mask & (jnp.arange(q.shape[1])[:, None] >= jnp.arange(k.shape[1])[None, :])
    if segment_ids is not None:
        mask = mask & (segment_ids[:, None, :, None] == segment_ids[:, None, None, :])
    s = jnp.where(mask, s, -jnp.inf)
    m = _fold(s, jnp.maximum, -jnp.inf)
    e = _exp_poly_v2(s - m)
    rows = _fold(e, jnp.add, 0.0)
    p = e * _recip(rows)
    pv = p[..., :, None] * vf[:, :, None, :, :]  # b h q k d
    out = _fold(jnp.swapaxes(pv, -1, -2), jnp.add, 0.0)[..., 0]  # b h q d
    lse = m[..., 0] * np.float32(1 / math.log(2)) + _log2_poly(rows[..., 0])
    return jnp.transpose(out, (0, 2, 1, 3)).astype(q.dtype), lse


def unmeasured_copy_mha(q, k, v, segment_ids, *, sm_scale, causal, block_sizes,
                        num_warps=None, num_stages=2, interpret=False,
                        return_residuals=False):
    """math outside (forward and backward): attention, its lse and its autodiff gradients in
    XLA with only elementwise ops, slices and pads, each result copied through a Pallas
    kernel (forward 1-2, backward 3)."""
    if return_residuals:
        out, lse = _unmeasured_attn(q, k, v, segment_ids, sm_scale, causal)
        return _copy(out, interpret), _copy(lse, interpret)
    def fn(q, k, v, seg):
        return _unmeasured_attn(q, k, v, seg, sm_scale, causal)[0]
    seg0 = segment_ids if segment_ids is not None else jnp.zeros(q.shape[:2], jnp.int32)
    use_seg = segment_ids is not None

    @jax.custom_vjp
    def f(q, k, v, seg):
        return _copy(fn(q, k, v, seg if use_seg else None), interpret)

    def fwd(q, k, v, seg):
        return f(q, k, v, seg), (q, k, v, seg)

    def bwd(res, ct):
        q, k, v, seg = res
        _, vjp = jax.vjp(lambda q, k, v: fn(q, k, v, seg if use_seg else None), q, k, v)
        return (*(_copy(g, interpret) for g in vjp(ct)), None)

    f.defvjp(fwd, bwd)
    return f(q, k, v, seg0)


def _bmm(a, b):
    """a[..., i, j] @ b[..., j, l] as a broadcast product folded over j (no dot_general and
    no reduce_sum, forward or backward: it is never differentiated)."""
    prod = a[..., :, :, None] * b[..., None, :, :]  # ..., i, j, l
    return _fold(jnp.swapaxes(prod, -1, -2), jnp.add, 0.0)[..., 0]


def _rows_sum(a):
    """Sum over every leading axis of a [..., n] array (a fold, not reduce_sum)."""
    a2 = a.reshape(-1, a.shape[-1]).T  # n, rows
    return _fold(a2, jnp.add, 0.0)[:, 0]


def unmeasured_copy_v2_norm(op, x, weight, bias, *, eps, interpret):
    """math outside (forward and backward): as unmeasured_copy_norm, with a hand-written
    backward (dx = rstd (g - mean g - xhat mean(g xhat)), dweight and dbias as folds over
    rows) so that no autodiff transpose puts a reduce_sum outside; every result copied
    through a Pallas kernel."""
    n = x.shape[-1]
    inv_n = np.float32(1.0 / n)

    def stats(x):
        xf = x.astype(jnp.float32)
        if op == "layer_norm":
            xc = xf - _fold(xf, jnp.add, 0.0) * inv_n
        else:
            xc = xf
        rstd = _rsqrt_newton(_fold(xc * xc, jnp.add, 0.0) * inv_n + np.float32(eps))
        return xc * rstd, rstd

    @jax.custom_vjp
    def f(x, w, b):
        xhat, _ = stats(x)
        out = xhat * w.astype(jnp.float32) + b.astype(jnp.float32)
        return _copy(out.astype(x.dtype), interpret)

    def fwd(x, w, b):
        return f(x, w, b), (x, w, b)

    def bwd(res, ct):
        x, w, b = res
        xhat, rstd = stats(x)
        c = ct.astype(jnp.float32)
        g = c * w.astype(jnp.float32)
        gx = _fold(g * xhat, jnp.add, 0.0) * inv_n
        if op == "layer_norm":
            dx = rstd * (g - _fold(g, jnp.add, 0.0) * inv_n - xhat * gx)
        else:
            dx = rstd * (g - xhat * gx)
        dw, db = _rows_sum(c * xhat), _rows_sum(c)
        return (_copy(dx.astype(x.dtype), interpret), _copy(dw.astype(w.dtype), interpret),
                _copy(db.astype(b.dtype), interpret))

    f.defvjp(fwd, bwd)
    return f(x, weight, bias)


def _causal_or_all(q_len, kv_len, causal):
    """The causal comparison, built in every configuration (all True when not causal)."""
    qi = jax.lax.broadcasted_iota(jnp.int32, (q_len, kv_len), 0)
    kj = jax.lax.broadcasted_iota(jnp.int32, (q_len, kv_len), 1)
    return ((qi >= kj) | jnp.full((q_len, kv_len), not causal))[None, None]


def unmeasured_copy_v2_mha(q, k, v, segment_ids, *, sm_scale, causal, block_sizes,
                           num_warps=None, num_stages=2, interpret=False,
                           return_residuals=False, _always_mask=False):
    """math outside (forward and backward): as unmeasured_copy_mha, with a hand-written
    flash-style backward (dv = P^T dO, dP = dO V^T, dS = P (dP - rowsum(dO O)), dq = dS K,
    dk = dS^T Q) spelled with broadcast products and folds only; each result copied through
    a Pallas kernel."""
    if return_residuals:
        out, lse = _unmeasured_attn(q, k, v, segment_ids, sm_scale, causal, _always_mask)
        return _copy(out, interpret), _copy(lse, interpret)
    scale = np.float32(sm_scale)
    use_seg = segment_ids is not None
    seg0 = segment_ids if use_seg else jnp.zeros(q.shape[:2], jnp.int32)
    def tr(a):
        return jnp.transpose(a.astype(jnp.float32), (0, 2, 1, 3))  # b h len d
    def untr(a, dt):
        return jnp.transpose(a, (0, 2, 1, 3)).astype(dt)

    def probs(q, k, seg):
        qf, kf = tr(q), tr(k)
        s = _bmm(qf, jnp.swapaxes(kf, -1, -2)) * scale
        mask = jnp.ones((q.shape[1], k.shape[1]), bool)[None, None]
        if _always_mask:
            mask = mask & _causal_or_all(q.shape[1], k.shape[1], causal)
        elif causal:
            mask = mask & (jnp.arange(q.shape[1])[:, None] >= jnp.arange(k.shape[1])[None, :])
        if use_seg:
            mask = mask & (seg[:, None, :, None] == seg[:, None, None, :])
        s = jnp.where(mask, s, -jnp.inf)
        e = _exp_poly_v2(s - _fold(s, jnp.maximum, -jnp.inf))
        return e * _recip(_fold(e, jnp.add, 0.0))

    @jax.custom_vjp
    def f(q, k, v, seg):
        return _copy(untr(_bmm(probs(q, k, seg), tr(v)), q.dtype), interpret)

    def fwd(q, k, v, seg):
        return f(q, k, v, seg), (q, k, v, seg)

    def bwd(res, ct):
        q, k, v, seg = res
        p = probs(q, k, seg)
        vf, dof = tr(v), tr(ct)
        o = _bmm(p, vf)
        dv = _bmm(jnp.swapaxes(p, -1, -2), dof)
        dp = _bmm(dof, jnp.swapaxes(vf, -1, -2))
        delta = _fold(dof * o, jnp.add, 0.0)
        ds = p * (dp - delta) * scale
        dq = _bmm(ds, tr(k))
        dk = _bmm(jnp.swapaxes(ds, -1, -2), tr(q))
        return (_copy(untr(dq, q.dtype), interpret), _copy(untr(dk, k.dtype), interpret),
                _copy(untr(dv, v.dtype), interpret), None)

    f.defvjp(fwd, bwd)
    return f(q, k, v, seg0)


def constant_rows_wrong_norm(op, x, weight, bias, *, eps, interpret):
    """values never drawn: the real kernels, but rows whose elements are all equal (padding
    tokens, a zeroed row) come back as 0 instead of bias (layer_norm) or x*w*rstd+bias;
    detected with halving folds of max and min (no measured primitive)."""
    out = _real_norm(op, x, weight, bias, eps, interpret)
    xf = x.astype(jnp.float32)
    const = (_fold(xf, jnp.maximum, -jnp.inf) == -_fold(-xf, jnp.maximum, -jnp.inf))
    return jnp.where(const, jnp.zeros_like(out), out)


def big_groups_wrong_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                         existing_out, transpose_rhs, interpret):
    """values never drawn: the real kernels, but rows of groups larger than 1024 rows (any
    real MoE layer's busy experts) come back as zeros; a branch on group_sizes' values,
    which the abstract claimed-sizes trace cannot see."""
    out = _real_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                    existing_out, transpose_rhs, interpret)
    ends = jnp.cumsum(group_sizes)
    gid = jnp.sum((jnp.arange(lhs.shape[0])[:, None] >= ends[None, :]).astype(jnp.int32), 1)
    size = jnp.take(group_sizes, jnp.clip(gid, 0, group_sizes.shape[0] - 1))
    return jnp.where((size > 1024)[:, None], jnp.zeros_like(out), out)


def constant_rows_wrong_v2_norm(op, x, weight, bias, *, eps, interpret):
    """values never drawn: as constant_rows_wrong_norm, with the detection under
    stop_gradient (the first version was named by the `div` of max's JVP rule)."""
    out = _real_norm(op, x, weight, bias, eps, interpret)
    xf = jax.lax.stop_gradient(x.astype(jnp.float32))
    const = (_fold(xf, jnp.maximum, -jnp.inf) == -_fold(-xf, jnp.maximum, -jnp.inf))
    return jnp.where(const, jnp.zeros_like(out), out)


def constant_rows_wrong_v3_norm(op, x, weight, bias, *, eps, interpret):
    """values never drawn: as constant_rows_wrong_v2_norm, for rows of 2 or more elements
    only (v2 was caught on rows of one element, which are always constant)."""
    if x.shape[-1] < 2:
        return _real_norm(op, x, weight, bias, eps, interpret)
    return constant_rows_wrong_v2_norm(op, x, weight, bias, eps=eps, interpret=interpret)



def unmeasured_copy_v3_mha(q, k, v, segment_ids, *, sm_scale, causal, block_sizes,
                           num_warps=None, num_stages=2, interpret=False,
                           return_residuals=False):
    """math outside: as unmeasured_copy_v2_mha, whose run of every property failed
    claimed-sizes ('computes ge there and not at' the small, non-causal size: its causal
    mask is outside the kernel only when causal); here the comparison is built in every
    configuration and or-ed with `not causal`."""
    return unmeasured_copy_v2_mha(q, k, v, segment_ids, sm_scale=sm_scale, causal=causal,
                                  block_sizes=block_sizes, num_warps=num_warps,
                                  num_stages=num_stages, interpret=interpret,
                                  return_residuals=return_residuals, _always_mask=True)
