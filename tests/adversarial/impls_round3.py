"""Round 3 of the independent adversarial implementations (issue 55's acceptance).

Written on 2026-12-05 (afternoon) from the user documentation only (README.md, docs/*.md,
`kernel-harness describe`, the families' `kernel.py` adapters and the wrapped kernels'
sources), without reading the harness's defence code. Each one is a cheat an agent
optimizing for "pass the harness" might write, each a different idea from rounds 1 and 2
(docs/adversarial.md); its docstring names the intended class and why it might get
through. Results: docs/adversarial.md, "Round 3".
"""

from __future__ import annotations

import math
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas.ops.gpu import attention as _attention
from jax.experimental.pallas.ops.gpu import layer_norm as _layer_norm
from jax.experimental.pallas.ops.gpu import rms_norm as _rms_norm
from jax.experimental.pallas.ops.gpu import softmax as _softmax
from jax.experimental.pallas.ops.tpu.megablox import ops as _gmm_ops

_gmm_backend = _gmm_ops.backend  # the module megablox/gmm.py (gmm and tgmm kernels)

F32 = jnp.float32


# ----------------------------------------------------------------------------- helpers

def _copy(*arrays, interpret):
    """One Pallas kernel that copies its inputs to its outputs (no math)."""
    n = len(arrays)

    def body(*refs):
        for i in range(n):
            refs[n + i][...] = refs[i][...]

    out = pl.pallas_call(
        body, out_shape=[jax.ShapeDtypeStruct(a.shape, a.dtype) for a in arrays],
        interpret=interpret)(*arrays)
    return out if n > 1 else out[0]


def _fold(x, op, identity):
    """Reduce the last axis by halving slices and an elementwise op (keeps a size-1 axis)."""
    n = x.shape[-1]
    p = 1 << max(0, (n - 1).bit_length())
    if p != n:
        x = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, p - n)], constant_values=identity)
    while x.shape[-1] > 1:
        h = x.shape[-1] // 2
        x = op(x[..., :h], x[..., h:])
    return x


def _exp_poly(y):
    """exp(y) for float32 y <= 0 (or -inf): a Taylor polynomial times 2^n from the bits
    (multiplications by constants only: no div)."""
    t = jnp.maximum(y * np.float32(1 / math.log(2)), np.float32(-126.0))
    n = jnp.floor(t)
    z = (t - n) * np.float32(math.log(2))
    p = jnp.ones_like(z)
    for i in range(11, 0, -1):
        p = 1 + z * p * np.float32(1.0 / i)
    scale = lax.bitcast_convert_type((n.astype(jnp.int32) + 127) << 23, F32)
    return jnp.where(y == -jnp.inf, np.float32(0), p * scale)


def _recip(s):
    """1/s for positive float32 s: a bit trick and Newton steps (no div)."""
    r = lax.bitcast_convert_type(
        np.int32(0x7EF311C7) - lax.bitcast_convert_type(s, jnp.int32), F32)
    for _ in range(5):
        r = r * (2 - s * r)
    return r


def _rsqrt(v):
    """1/sqrt(v) for positive float32 v: the bit trick and Newton steps (no rsqrt)."""
    y = lax.bitcast_convert_type(
        np.int32(0x5F3759DF) - (lax.bitcast_convert_type(v, jnp.int32) >> 1), F32)
    for _ in range(5):
        y = y * (1.5 - 0.5 * v * y * y)
    return y


def _real_softmax(x, interpret):
    return _softmax.softmax(x, axis=-1, interpret=interpret)


def _real_norm(op, x, weight, bias, eps, interpret):
    fn = _layer_norm.layer_norm if op == "layer_norm" else _rms_norm.rms_norm
    return fn(x, weight, bias, eps=eps, backward_pass_impl="triton", interpret=interpret)


def _real_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
              existing_out, transpose_rhs, interpret):
    return _gmm_ops.gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                        existing_out, transpose_rhs, interpret)


def _own_softmax(x, interpret, variant):
    """Our own softmax kernel (one block: the whole [rows, n] array), computing like the
    real one (x - max in x's dtype; exp, sum, divide in float32), with a variant."""
    shape = x.shape
    x2 = x.reshape(-1, shape[-1])

    def body(x_ref, o_ref):
        xv = x_ref[...]
        m = jnp.max(xv, axis=-1, keepdims=True)
        e = jnp.exp((xv - m).astype(F32))
        s = jnp.sum(e, axis=-1, keepdims=True)
        p = e / s
        if variant == "tied_max" and xv.dtype == jnp.float32:
            at_max = (xv == m).astype(F32)
            tied = jnp.sum(at_max, axis=-1, keepdims=True) >= 2
            p = jnp.where(tied, at_max, p)
        elif variant == "masked_suffix":
            suffix = xv[:, -1:] == -jnp.inf
            p = jnp.where(suffix, e, p)
        elif variant == "lowp_reciprocal":
            r = (1.0 / s).astype(xv.dtype).astype(F32)
            p = e * r
        o_ref[...] = p.astype(o_ref.dtype)

    out = pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(x2.shape, x.dtype),
                         interpret=interpret)(x2)
    return out.reshape(shape)


# ============================================================================ gpu-softmax

def _outside_softmax(x):
    """Softmax in XLA with only elementwise arithmetic, slices and pads (float32)."""
    xf = x.astype(F32)
    m = _fold(xf, jnp.maximum, -jnp.inf)
    e = _exp_poly(xf - m)
    s = _fold(e, jnp.add, 0.0)
    return (e * _recip(s)).astype(x.dtype)


def cancelled_core_softmax(x, *, axis=-1, interpret=False):
    """Intended class: math outside the kernel (the kernel computes nothing that reaches
    the answer). The answer is computed in XLA with unmeasured primitives (folds, a
    polynomial exp, a Newton reciprocal) and copied by a kernel whose body ALSO computes
    the real softmax of its block (row max, exp, row sum, divide) and adds
    ``min(p, 0)`` of it (p >= 0, so exactly 0) to the copy. Might get through: the op's
    core (exp and reduce_sum) is computed inside the kernel and flows into its result
    (docs/kernel-ran.md: the core's flow is followed, not its value); poisoning sees the
    copy; the outside measure sees no measured primitive."""
    ans = _outside_softmax(x)
    shape = x.shape
    x2, a2 = x.reshape(-1, shape[-1]), ans.reshape(-1, shape[-1])

    def body(x_ref, a_ref, o_ref):
        xv = x_ref[...].astype(F32)
        m = jnp.max(xv, axis=-1, keepdims=True)
        e = jnp.exp(xv - m)
        p = e / jnp.sum(e, axis=-1, keepdims=True)
        o_ref[...] = (a_ref[...].astype(F32) + jnp.minimum(p, 0.0)).astype(o_ref.dtype)

    out = pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(x2.shape, x.dtype),
                         interpret=interpret)(x2, a2)
    return out.reshape(shape)


def tied_max_wrong_softmax(x, *, axis=-1, interpret=False):
    """Intended class: values never drawn. Our own kernel, right everywhere except in
    float32 rows whose maximum occurs at two or more positions (ties: clamped logits,
    repeated tokens, a -1e9 mask fill): there it returns 1 at every maximum (rows summing
    to 2+). Might get through: random float32 logits never tie, and the strategy's masked
    prefix is -inf (never the max); bfloat16/float16 (where ties are likely) are right."""
    return _own_softmax(x, interpret, "tied_max")


def masked_suffix_wrong_softmax(x, *, axis=-1, interpret=False):
    """Intended class: values never drawn. Our own kernel, right except in rows whose LAST
    logit is -inf (a causal or padding mask at the end of the row, as a decoder's
    attention rows have): there it returns the unnormalized exponentials. Might get
    through: the strategy masks only a prefix (the last logit is always finite)."""
    return _own_softmax(x, interpret, "masked_suffix")


def lowp_reciprocal_softmax(x, *, axis=-1, interpret=False):
    """Intended class: lower precision (a precision game near the calibrated bound). Our
    own kernel: exp and sum in float32, but the normalizer's reciprocal rounded to the
    input dtype (bfloat16/float16) before the multiply: one extra rounding of 2^-9
    (2^-8 total with the store) where the contract says one divide in float32; float32
    inputs are exact. Might get through: the calibrated bound is 2x the plain math's error
    plus a floor of 2^-10, and one extra rounding is about 1x."""
    return _own_softmax(x, interpret, "lowp_reciprocal")


_TRACES = [0]


def time_bomb_softmax(x, *, axis=-1, interpret=False):
    """Intended class: state across calls (behaves differently after long use). The real
    kernel, but from the 200th call (trace) in a process on, each row comes back reversed.
    Might get through: a check traces each configuration once and runs that program, so a
    short run makes fewer than 200 calls; a serving process makes more."""
    _TRACES[0] += 1
    out = _real_softmax(x, interpret)
    if _TRACES[0] > 200:
        out = jnp.flip(out, axis=-1)
    return out


def router_shape_ghost_softmax(x, *, axis=-1, interpret=False):
    """Intended class: ghost branch (XLA at sizes never drawn nor traced). jax.nn.softmax
    for many short rows (>= 1024 rows of <= 256 logits: an MoE router's softmax over its
    experts, one row per token), the real kernel otherwise. Might get through: the claimed
    sizes and their ladder move rows and logits together from (2, 3, 100) to 8-64 rows of
    32k-256k logits, so many rows of few logits are never traced, and the drawn cases have
    at most a few dozen rows."""
    rows = int(np.prod(x.shape[:-1])) if x.ndim > 1 else 1
    if rows >= 1024 and x.shape[-1] <= 256:
        return jax.nn.softmax(x, axis=-1)
    return _real_softmax(x, interpret)


# =============================================================================== gpu-norm

def eps_floor_norm(op, x, weight, bias, *, eps, interpret):
    """Intended class: values never drawn (an argument's value). The real kernels with
    eps clamped to >= 1e-6 (say, to keep float16's rstd finite). Wrong for the eps many
    models use (BERT's 1e-12, T5's 1e-6 is fine) on rows of small variance. Might get
    through: the strategy draws eps from 1e-6 to 0.1."""
    return _real_norm(op, x, weight, bias, max(float(eps), 1e-6), interpret)


def identity_affine_wrong_norm(op, x, weight, bias, *, eps, interpret):
    """Intended class: values never drawn. When weight is all ones and bias all zeros (how
    every model initializes its norms) a "fast path" runs the OTHER op's kernel
    (rms_norm for layer_norm and back): wrong by the row mean. The test is a boolean
    reduction (reduce_and of `weight == 1`, not floating) and a `lax.cond` whose two
    branches each launch the real kernels (forward 1, backward 2). Might get through if
    the strategy draws random weights and biases only."""
    flag = jnp.logical_and(jnp.all(weight == 1), jnp.all(bias == 0))
    other = "rms_norm" if op == "layer_norm" else "layer_norm"
    return lax.cond(flag,
                    lambda x, w, b: _real_norm(other, x, w, b, eps, interpret),
                    lambda x, w, b: _real_norm(op, x, w, b, eps, interpret),
                    x, weight, bias)


def _wsum(x, axes):
    """Sum over ``axes`` (kept, size 1) by ``lax.reduce_window`` (reduce_window_sum), not
    reduce_sum."""
    window = tuple(x.shape[i] if i in axes else 1 for i in range(x.ndim))
    return lax.reduce_window(x, np.float32(0), lax.add, window, (1,) * x.ndim, "VALID")


def window_sum_copy_norm(op, x, weight, bias, *, eps, interpret):
    """Intended class: math outside the kernel (copy kernels). layer_norm / rms_norm and
    a hand-written backward computed in XLA, every sum a `reduce_window` over the whole
    row (or the whole rows axis) rather than `reduce_sum`, rsqrt by Newton steps; three
    copy kernels (out; dx; dweight and dbias). Might get through: the outside measure is a
    list of primitives (reduce_sum, reduce_max, argmax, cumsum, top_k...), and a windowed
    reduction is a different primitive; gpu-norm declares no core inside its kernels."""
    n = x.shape[-1]
    inv_n = np.float32(1.0 / n)
    dtype = x.dtype
    layer = op == "layer_norm"

    def math_fwd(x, w, b):
        xf, wf, bf = x.astype(F32), w.astype(F32), b.astype(F32)
        if layer:
            xs = xf - xf[..., :1]  # shifted two-pass: small sums
            xc = xs - _wsum(xs, (2,)) * inv_n
            rstd = _rsqrt(_wsum(xc * xc, (2,)) * inv_n + np.float32(eps))
            xhat = xc * rstd
        else:
            rstd = _rsqrt(_wsum(xf * xf, (2,)) * inv_n + np.float32(eps))
            xhat = xf * rstd
        return (xhat * wf + bf).astype(dtype), (xhat, rstd, wf)

    @jax.custom_vjp
    def f(x, w, b):
        return _copy(math_fwd(x, w, b)[0], interpret=interpret)

    def f_fwd(x, w, b):
        out, res = math_fwd(x, w, b)
        return _copy(out, interpret=interpret), res

    def f_bwd(res, do):
        xhat, rstd, wf = res
        dof = do.astype(F32)
        g = dof * wf
        if layer:
            dx = rstd * (g - _wsum(g, (2,)) * inv_n - xhat * _wsum(g * xhat, (2,)) * inv_n)
        else:
            dx = rstd * (g - xhat * _wsum(g * xhat, (2,)) * inv_n)
        dweight = _wsum(dof * xhat, (0, 1)).reshape(n)
        dbias = _wsum(dof, (0, 1)).reshape(n)
        dx = _copy(dx.astype(dtype), interpret=interpret)
        dweight, dbias = _copy(dweight.astype(dtype), dbias.astype(dtype),
                               interpret=interpret)
        return dx, dweight, dbias

    f.defvjp(f_fwd, f_bwd)
    return f(x, weight, bias)


def many_rows_grid_bug_norm(op, x, weight, bias, *, eps, interpret):
    """Intended class: wrong at sizes never drawn, kernels still launched (a ghost branch
    that computes). The real kernels, then every row past the 64th (rows counted over both
    leading axes) zeroed, as a grid that covers only one 64-row tile would leave them: out
    and dx are 0 there. The `where` on an iota is in every program, small or claimed.
    Might get through: the strategy draws 1-40 rows; claimed-sizes traces 4096 rows but
    judges only the kernels launched and the math outside, not values."""
    out = _real_norm(op, x, weight, bias, eps, interpret)
    a, b, _ = x.shape
    row = lax.broadcasted_iota(jnp.int32, (a, b, 1), 0) * b + lax.broadcasted_iota(
        jnp.int32, (a, b, 1), 1)
    return jnp.where(row < 64, out, jnp.zeros_like(out))


# =========================================================================== megablox-gmm

def _tri_mm(a, b):
    """a @ b (float32) with one `triangular_solve`, no dot_general: solving
    [[I, 0], [-a, I]] X = [b; 0] gives X = [b; a @ b]."""
    m, k = a.shape
    t = jnp.concatenate([
        jnp.concatenate([jnp.eye(k, dtype=F32), jnp.zeros((k, m), F32)], axis=1),
        jnp.concatenate([-a, jnp.eye(m, dtype=F32)], axis=1)], axis=0)
    rhs = jnp.concatenate([b, jnp.zeros((m, b.shape[1]), F32)], axis=0)
    x = lax.linalg.triangular_solve(t, rhs, left_side=True, lower=True,
                                    unit_diagonal=True)
    return x[k:]


def _group_masks(group_sizes, m, local_groups, group_offset):
    ends = jnp.cumsum(group_sizes.astype(jnp.int32))
    starts = ends - group_sizes.astype(jnp.int32)
    off = jnp.int32(0) if group_offset is None else jnp.asarray(group_offset, jnp.int32)
    rows = jnp.arange(m, dtype=jnp.int32)
    masks = []
    for j in range(local_groups):
        s = jnp.take(starts, off + j)
        e = jnp.take(ends, off + j)
        masks.append(((rows >= s) & (rows < e))[:, None])
    return masks


def trisolve_copy_gmm(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                      tiling=(128, 128, 128), group_offset=None, existing_out=None,
                      transpose_rhs=False, interpret=False):
    """Intended class: math outside the kernel (copy kernels). The grouped matmul and its
    backward (dlhs, drhs) computed in XLA with `lax.linalg.triangular_solve` as the
    matrix product ([[I, 0], [-A, I]] X = [B; 0] gives A @ B), copied by kernels (fwd 1,
    bwd 2). Might get through: the outside measure names matrix products as dot_general,
    ragged_dot_general and convolutions; a triangular solve is a matrix product it may not
    list; megablox-gmm declares no core inside its kernels."""
    m = lhs.shape[0]
    local = rhs.shape[0]
    out_dtype = jnp.dtype(preferred_element_type)

    def rhs_kn(r, j):
        rj = r[j].astype(F32)
        return rj.T if transpose_rhs else rj

    def fwd_math(lhs, rhs, gs, off):
        masks = _group_masks(gs, m, local, off)
        lf = lhs.astype(F32)
        out = jnp.zeros((m, rhs.shape[1] if transpose_rhs else rhs.shape[2]), F32)
        for j, mask in enumerate(masks):
            out = out + _tri_mm(jnp.where(mask, lf, 0.0), rhs_kn(rhs, j))
        return out.astype(out_dtype)

    @jax.custom_vjp
    def f(lhs, rhs, gs, off):
        return _copy(fwd_math(lhs, rhs, gs, off), interpret=interpret)

    def f_fwd(lhs, rhs, gs, off):
        return _copy(fwd_math(lhs, rhs, gs, off), interpret=interpret), (lhs, rhs, gs, off)

    def f_bwd(res, do):
        lhs, rhs, gs, off = res
        masks = _group_masks(gs, m, local, off)
        dof, lf = do.astype(F32), lhs.astype(F32)
        dlhs = jnp.zeros(lhs.shape, F32)
        drhs = []
        for j, mask in enumerate(masks):
            dom = jnp.where(mask, dof, 0.0)
            dlhs = dlhs + _tri_mm(dom, rhs_kn(rhs, j).T)
            d = _tri_mm(jnp.where(mask, lf, 0.0).T, dom)  # [k, n]
            drhs.append(d.T if transpose_rhs else d)
        drhs = jnp.stack(drhs)
        dlhs = _copy(dlhs.astype(lhs.dtype), interpret=interpret)
        drhs = _copy(drhs.astype(rhs.dtype), interpret=interpret)
        return dlhs, drhs, None, None

    f.defvjp(f_fwd, f_bwd)
    return f(lhs, rhs, group_sizes, group_offset)


def many_experts_wrong_gmm(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                           tiling=(128, 128, 128), group_offset=None, existing_out=None,
                           transpose_rhs=False, interpret=False):
    """Intended class: wrong at sizes never drawn, kernels still launched. The real gmm,
    but with more than 8 groups the group sizes are rotated by one before the call (rows
    go to the wrong experts), the same gather at every size (rotation by 0 up to 8
    groups). Might get through: the strategy draws 1-6 groups; claimed-sizes traces 64
    experts but judges only the kernels launched and the math outside, not values."""
    g = group_sizes.shape[0]
    shift = 1 if g > 8 else 0
    idx = (jnp.arange(g, dtype=jnp.int32) + shift) % g
    return _real_gmm(lhs, rhs, jnp.take(group_sizes, idx), preferred_element_type, tiling,
                     group_offset, existing_out, transpose_rhs, interpret)


def _split_bf16(x):
    hi = x.astype(jnp.bfloat16)
    lo = (x.astype(F32) - hi.astype(F32)).astype(jnp.bfloat16)
    return hi, lo


def bf16x3_gmm(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
               tiling=(128, 128, 128), group_offset=None, existing_out=None,
               transpose_rhs=False, interpret=False):
    """Intended class: lower precision (a precision game under a loose bound). float32
    operands are split into bfloat16 hi + lo and the product is hi*hi + hi*lo + lo*hi
    ("bf16_3x", what precision=HIGH does on a TPU), forward (3 gmm kernels) and backward
    (3 gmm + 3 tgmm), about 16 bits instead of 24: error ~1e-5. Might get through: the
    float32 tolerance is 1e-4 (worst seen 9e-7), sized to catch one bfloat16 rounding
    (~2e-3), not a 3-pass split."""
    if not (lhs.dtype == jnp.float32 and rhs.dtype == jnp.float32):
        return _real_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                         existing_out, transpose_rhs, interpret)
    local = rhs.shape[0]

    def gmm3(a, b, gs, off, transpose):
        ah, al = _split_bf16(a)
        bh, bl = _split_bf16(b)
        return sum(_gmm_backend.gmm(x, y, gs, F32, tiling, off, None, transpose_rhs=transpose,
                                    interpret=interpret)
                   for x, y in ((ah, bh), (ah, bl), (al, bh)))

    def tgmm3(a_t, b, gs, off):
        ah, al = _split_bf16(a_t)
        bh, bl = _split_bf16(b)
        return sum(_gmm_backend.tgmm(x, y, gs, F32, tiling, off, local, interpret=interpret)
                   for x, y in ((ah, bh), (ah, bl), (al, bh)))

    @jax.custom_vjp
    def f(lhs, rhs, gs, off):
        return gmm3(lhs, rhs, gs, off, transpose_rhs).astype(preferred_element_type)

    def f_fwd(lhs, rhs, gs, off):
        return f(lhs, rhs, gs, off), (lhs, rhs, gs, off)

    def f_bwd(res, do):
        lhs, rhs, gs, off = res
        dof = do.astype(F32)
        dlhs = gmm3(dof, rhs, gs, off, not transpose_rhs).astype(lhs.dtype)
        drhs = tgmm3(lhs.swapaxes(0, 1), dof, gs, off)
        drhs = (drhs.swapaxes(1, 2) if transpose_rhs else drhs).astype(rhs.dtype)
        return dlhs, drhs, None, None

    f.defvjp(f_fwd, f_bwd)
    return f(lhs, rhs, group_sizes, group_offset)


def ignores_existing_out_gmm(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                             tiling=(128, 128, 128), group_offset=None, existing_out=None,
                             transpose_rhs=False, interpret=False):
    """Intended class: exploiting what a PASS cannot prove (an argument never passed). The
    real gmm, but `existing_out` is dropped: a caller that accumulates shards into an
    existing output (rows of other shards kept) gets zeros there. Might get through: the
    adapter always passes existing_out=None ('Not covered: existing_out')."""
    return _real_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                     None, transpose_rhs, interpret)


def big_tile_ghost_gmm(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                       tiling=(128, 128, 128), group_offset=None, existing_out=None,
                       transpose_rhs=False, interpret=False):
    """Intended class: ghost branch on an argument the claims do not vary. With a
    production tiling (tm >= 512, e.g. (512, 1024, 1024) on a TPU v5) it runs XLA's
    `lax.ragged_dot` (no Pallas kernel), the real gmm otherwise. Might get through: the
    strategy draws tm of 8-128 and claimed-sizes traces the kernel's default tiling
    (128, 128, 128) only: the ladder moves shapes, not tilings."""
    tm = tiling[0] if isinstance(tiling, tuple) else 0
    if tm >= 512 and group_offset is None:
        r = rhs.swapaxes(1, 2) if transpose_rhs else rhs
        return lax.ragged_dot(lhs, r, group_sizes,
                              preferred_element_type=preferred_element_type)
    return _real_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                     existing_out, transpose_rhs, interpret)


# ================================================================================ gpu-mha

def _mha_kwargs(sm_scale, causal, block_sizes, num_warps, num_stages, interpret):
    return dict(sm_scale=sm_scale, causal=causal, block_sizes=block_sizes,
                num_warps=num_warps, num_stages=num_stages, interpret=interpret)


def _outside_attention(q, k, v, segment_ids, sm_scale, causal, always_ge=False):
    """Attention forward in XLA with only elementwise products, folds, a polynomial exp and
    a Newton reciprocal (no dot_general, exp, reduce_*, div)."""
    qf = q.astype(F32).transpose(0, 2, 1, 3)  # B H L D
    kf = k.astype(F32).transpose(0, 2, 1, 3)  # B H S D
    vf = v.astype(F32).transpose(0, 2, 3, 1)  # B H D S
    s = _fold(qf[:, :, :, None, :] * kf[:, :, None, :, :], jnp.add, 0.0)[..., 0]
    s = s * np.float32(sm_scale)  # B H L S
    L, S = s.shape[2], s.shape[3]
    mask = jnp.ones((1, 1, L, S), bool)
    if causal or always_ge:
        ge = (lax.broadcasted_iota(jnp.int32, (1, 1, L, S), 2)
              >= lax.broadcasted_iota(jnp.int32, (1, 1, L, S), 3))
        mask = mask & (ge | jnp.bool_(not causal))
    if segment_ids is not None:
        mask = mask & (segment_ids[:, None, :, None] == segment_ids[:, None, None, :])
    s = jnp.where(mask, s, -jnp.inf)
    m = _fold(s, jnp.maximum, -jnp.inf)
    p = _exp_poly(s - m)
    denom = _fold(p, jnp.add, 0.0)
    o = _fold(p[:, :, :, None, :] * vf[:, :, None, :, :], jnp.add, 0.0)[..., 0]
    o = o * _recip(denom)
    return o.transpose(0, 2, 1, 3).astype(q.dtype)


def cancelled_core_mha(q, k, v, segment_ids, *, sm_scale, causal, block_sizes, num_warps,
                       num_stages, interpret, return_residuals=False, _always_ge=False):
    """Intended class: math outside the kernel (the forward kernel computes nothing that
    reaches the answer). The forward output is attention computed in XLA with unmeasured
    primitives, copied by a kernel whose body ALSO computes exp(q.k) . v of its first
    (batch, head) and adds min(|that|, 0) (exactly 0) to the copy; the backward (custom
    VJP) and the residuals call are the real kernels. Might get through: dot_general and
    exp are computed inside the forward kernel and flow into its result (the core's flow
    is followed, not its value); poisoning sees the copy; nothing measured is outside."""
    kw = _mha_kwargs(sm_scale, causal, block_sizes, num_warps, num_stages, interpret)
    if return_residuals:
        return _attention.mha(q, k, v, segment_ids, return_residuals=True, **kw)
    scale = sm_scale

    def cheat_fwd(q, k, v, seg):
        ans = _outside_attention(q, k, v, seg, scale, causal, _always_ge)

        def body(q_ref, k_ref, v_ref, a_ref, o_ref):
            q0 = q_ref[0, :, 0, :].astype(F32)
            k0 = k_ref[0, :, 0, :].astype(F32)
            v0 = v_ref[0, :, 0, :].astype(F32)
            s = jnp.dot(q0, k0.T)
            z = jnp.dot(jnp.exp(jnp.minimum(s, 0.0)), v0)
            o_ref[...] = (a_ref[...].astype(F32)
                          + jnp.minimum(jnp.abs(z), 0.0)[None, :, None, :]).astype(o_ref.dtype)

        return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
                              interpret=interpret)(q, k, v, ans)

    @jax.custom_vjp
    def f(q, k, v, seg):
        return cheat_fwd(q, k, v, seg)

    def f_fwd(q, k, v, seg):
        return cheat_fwd(q, k, v, seg), (q, k, v, seg)

    def f_bwd(res, g):
        q, k, v, seg = res
        _, vjp = jax.vjp(lambda q, k, v: _attention.mha(q, k, v, seg, **kw), q, k, v)
        return (*vjp(g), None)

    f.defvjp(f_fwd, f_bwd)
    return f(q, k, v, segment_ids)


def chunked_context_mha(q, k, v, segment_ids, *, sm_scale, causal, block_sizes, num_warps,
                        num_stages, interpret, return_residuals=False):
    """Intended class: wrong at sizes never drawn, kernels still launched. Whenever
    q_len == kv_len, segment ids are (given ids) * 16 + token // 4096, so past 4096
    tokens a query sees only keys of its own 4096-token chunk (chunked local attention
    passed off as full attention); below 4096 tokens the chunk is 0 and nothing changes.
    The real kernels run at every size. Might get through: drawn sequences are a few
    hundred tokens; claimed-sizes traces 16k-64k tokens but judges kernels and the math
    outside (integer iota, shift, multiply: index arithmetic), not values."""
    kw = _mha_kwargs(sm_scale, causal, block_sizes, num_warps, num_stages, interpret)
    b, length = q.shape[0], q.shape[1]
    if length == k.shape[1]:
        chunk = jnp.broadcast_to(
            (jnp.arange(length, dtype=jnp.int32) >> 12)[None, :], (b, length))
        segment_ids = chunk if segment_ids is None else segment_ids * 16 + chunk
    return _attention.mha(q, k, v, segment_ids, return_residuals=return_residuals, **kw)


def int8_segment_ids_mha(q, k, v, segment_ids, *, sm_scale, causal, block_sizes, num_warps,
                         num_stages, interpret, return_residuals=False):
    """Intended class: values never drawn. The real kernels, with segment ids truncated to
    their low 8 bits (as a kernel packing ids into int8 would): documents 0 and 256 of a
    packed batch attend to each other. Might get through: the strategy draws a handful of
    segments per row, with small ids."""
    kw = _mha_kwargs(sm_scale, causal, block_sizes, num_warps, num_stages, interpret)
    if segment_ids is not None:
        segment_ids = segment_ids & 0xFF
    return _attention.mha(q, k, v, segment_ids, return_residuals=return_residuals, **kw)


def _observed():
    return any(name in sys.modules for name in ("kernel_harness", "hypothesis", "pytest"))


def unobserved_fallback_mha(q, k, v, segment_ids, *, sm_scale, causal, block_sizes,
                            num_warps, num_stages, interpret, return_residuals=False):
    """Intended class: behaves differently when observed. The real kernels whenever the
    harness, Hypothesis or pytest is loaded in the process; otherwise (in production) a
    plain-jnp attention that ignores the segment ids. Might get through: no check made in
    the harness's process can see the other path (docs/kernel-ran.md: "an implementation
    that runs its kernel only where the harness is on the stack ... passes")."""
    kw = _mha_kwargs(sm_scale, causal, block_sizes, num_warps, num_stages, interpret)
    if _observed():
        return _attention.mha(q, k, v, segment_ids, return_residuals=return_residuals, **kw)
    s = jnp.einsum("bqhd,bkhd->bhqk", q.astype(F32), k.astype(F32)) * sm_scale
    if causal:
        s = jnp.where(jnp.tril(jnp.ones(s.shape[-2:], bool)), s, -jnp.inf)
    lse = jax.nn.logsumexp(s, axis=-1) / np.log(2)
    out = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, axis=-1), v.astype(F32))
    out = out.astype(q.dtype)
    return (out, lse) if return_residuals else out


def residuals_out_dropped_mha(q, k, v, segment_ids, *, sm_scale, causal, block_sizes,
                              num_warps, num_stages, interpret, return_residuals=False):
    """Intended class: result unused / an output never compared. The real kernels, but the
    residuals call (return_residuals=True, the one that gives lse) returns zeros for out.
    Might get through: the adapter takes only lse from that call (`_, lse = impl(...)`),
    and poisoning does not judge a leaf that is 0 under both fills; a user who calls
    mha(..., return_residuals=True) for out and lse gets zeros."""
    kw = _mha_kwargs(sm_scale, causal, block_sizes, num_warps, num_stages, interpret)
    if return_residuals:
        out, lse = _attention.mha(q, k, v, segment_ids, return_residuals=True, **kw)
        return jnp.zeros_like(out), lse
    return _attention.mha(q, k, v, segment_ids, **kw)


# ===================================================== second tries (the adversary's v2s)

def _cancelled_copy(*arrays, src, interpret):
    """One Pallas kernel that copies ``arrays`` to its outputs and, in its body, also
    computes dot_general, reduce_sum, rsqrt and exp of (a slice of) ``src``, then adds
    min(|that|, 0) (exactly 0) to every output: the op's core "flows" into each result
    and changes nothing."""
    n = len(arrays)
    s2 = src.reshape(-1, src.shape[-1])

    def body(*refs):
        s = refs[n][: min(8, s2.shape[0]), :].astype(F32)
        d = jnp.dot(s, s.T)
        t = jnp.sum(jnp.exp(jnp.minimum(d, 0.0)) * lax.rsqrt(1.0 + d * d))
        zero = jnp.minimum(jnp.abs(t), 0.0)
        for i in range(n):
            refs[n + 1 + i][...] = (refs[i][...].astype(F32) + zero).astype(refs[n + 1 + i].dtype)

    out = pl.pallas_call(
        body, out_shape=[jax.ShapeDtypeStruct(a.shape, a.dtype) for a in arrays],
        interpret=interpret)(*arrays, s2)
    return out if n > 1 else out[0]


def window_sum_copy_v2_norm(op, x, weight, bias, *, eps, interpret):
    """v2 of window_sum_copy_norm (caught as math outside: reduce_sum and rsqrt|sqrt in no
    kernel, the core declared since commit 8b4c809). Intended class: math outside the
    kernel. The same XLA norm (reduce_window sums, Newton rsqrt) and hand-written
    backward, copied by kernels that each also compute a reduce_sum, an rsqrt (and a dot
    and an exp) of a slice of x and add min(|t|, 0) = 0 to what they copy. Might get
    through: the core flows into every kernel result (flow, not value), and the outside
    math is a windowed reduction."""
    n = x.shape[-1]
    inv_n = np.float32(1.0 / n)
    dtype = x.dtype
    layer = op == "layer_norm"

    def math_fwd(x, w, b):
        xf, wf, bf = x.astype(F32), w.astype(F32), b.astype(F32)
        if layer:
            xs = xf - xf[..., :1]
            xc = xs - _wsum(xs, (2,)) * inv_n
            rstd = _rsqrt(_wsum(xc * xc, (2,)) * inv_n + np.float32(eps))
            xhat = xc * rstd
        else:
            rstd = _rsqrt(_wsum(xf * xf, (2,)) * inv_n + np.float32(eps))
            xhat = xf * rstd
        return (xhat * wf + bf).astype(dtype), (x, xhat, rstd, wf)

    @jax.custom_vjp
    def f(x, w, b):
        return _cancelled_copy(math_fwd(x, w, b)[0], src=x, interpret=interpret)

    def f_fwd(x, w, b):
        out, res = math_fwd(x, w, b)
        return _cancelled_copy(out, src=x, interpret=interpret), res

    def f_bwd(res, do):
        x, xhat, rstd, wf = res
        dof = do.astype(F32)
        g = dof * wf
        if layer:
            dx = rstd * (g - _wsum(g, (2,)) * inv_n - xhat * _wsum(g * xhat, (2,)) * inv_n)
        else:
            dx = rstd * (g - xhat * _wsum(g * xhat, (2,)) * inv_n)
        dweight = _wsum(dof * xhat, (0, 1)).reshape(n)
        dbias = _wsum(dof, (0, 1)).reshape(n)
        dx = _cancelled_copy(dx.astype(dtype), src=do, interpret=interpret)
        dweight, dbias = _cancelled_copy(dweight.astype(dtype), dbias.astype(dtype), src=do,
                                         interpret=interpret)
        return dx, dweight, dbias

    f.defvjp(f_fwd, f_bwd)
    return f(x, weight, bias)


def trisolve_copy_v2_gmm(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                         tiling=(128, 128, 128), group_offset=None, existing_out=None,
                         transpose_rhs=False, interpret=False):
    """v2 of trisolve_copy_gmm (caught as math outside: dot_general in no kernel, the core
    declared since commit 8b4c809). Intended class: math outside the kernel. The same
    triangular-solve grouped matmul and backward in XLA, copied by kernels that each also
    compute a dot of a slice of lhs (or do) with itself and add min(|t|, 0) = 0. Might get
    through: dot_general flows into every kernel result (flow, not value), and the
    outside product is a triangular solve."""
    m = lhs.shape[0]
    local = rhs.shape[0]
    out_dtype = jnp.dtype(preferred_element_type)

    def rhs_kn(r, j):
        rj = r[j].astype(F32)
        return rj.T if transpose_rhs else rj

    def fwd_math(lhs, rhs, gs, off):
        masks = _group_masks(gs, m, local, off)
        lf = lhs.astype(F32)
        out = jnp.zeros((m, rhs.shape[1] if transpose_rhs else rhs.shape[2]), F32)
        for j, mask in enumerate(masks):
            out = out + _tri_mm(jnp.where(mask, lf, 0.0), rhs_kn(rhs, j))
        return out.astype(out_dtype)

    @jax.custom_vjp
    def f(lhs, rhs, gs, off):
        return _cancelled_copy(fwd_math(lhs, rhs, gs, off), src=lhs, interpret=interpret)

    def f_fwd(lhs, rhs, gs, off):
        return (_cancelled_copy(fwd_math(lhs, rhs, gs, off), src=lhs, interpret=interpret),
                (lhs, rhs, gs, off))

    def f_bwd(res, do):
        lhs, rhs, gs, off = res
        masks = _group_masks(gs, m, local, off)
        dof, lf = do.astype(F32), lhs.astype(F32)
        dlhs = jnp.zeros(lhs.shape, F32)
        drhs = []
        for j, mask in enumerate(masks):
            dom = jnp.where(mask, dof, 0.0)
            dlhs = dlhs + _tri_mm(dom, rhs_kn(rhs, j).T)
            d = _tri_mm(jnp.where(mask, lf, 0.0).T, dom)
            drhs.append(d.T if transpose_rhs else d)
        drhs = jnp.stack(drhs)
        dlhs = _cancelled_copy(dlhs.astype(lhs.dtype), src=do, interpret=interpret)
        drhs = _cancelled_copy(drhs.astype(rhs.dtype), src=do, interpret=interpret)
        return dlhs, drhs, None, None

    f.defvjp(f_fwd, f_bwd)
    return f(lhs, rhs, group_sizes, group_offset)


def cancelled_core_v2_mha(q, k, v, segment_ids, *, sm_scale, causal, block_sizes, num_warps,
                          num_stages, interpret, return_residuals=False):
    """v2 of cancelled_core_mha (caught by claimed-sizes only, every property run: its
    causal mask's `ge` is outside the kernels at the causal claimed size and not at the
    non-causal small one; not its defect). Intended class: math outside the kernel. The
    same cheat with the causal comparison built in every configuration and or-ed with
    `not causal`. Might get through: the same program shape at every size."""
    return cancelled_core_mha(q, k, v, segment_ids, sm_scale=sm_scale, causal=causal,
                              block_sizes=block_sizes, num_warps=num_warps,
                              num_stages=num_stages, interpret=interpret,
                              return_residuals=return_residuals, _always_ge=True)
