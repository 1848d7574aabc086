"""Planted implementations whose Pallas kernel computes nothing (issue 55, item 3): the
answer is computed outside the kernels (XLA, or numpy through a ``pure_callback``) and a
``pallas_call`` only copies it, or the kernel does one small part (the row max) while XLA
does the rest. Each launches at least as many kernels as the pristine one, forward and
backward, and its outputs depend on them, so the count and poisoning pass it; only the
measure of the math outside the kernels fails it. For gpu-softmax, gpu-norm, megablox-gmm
and gpu-mha."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

from kernel_harness.ops.grouped_matmul.reference import grouped_matmul
from tests.helpers.poison_impls import xla_attention


def _copy(arrays, interpret):
    """One ``pallas_call`` whose body only copies ``arrays`` (whole-array blocks)."""
    def body(*refs):
        n = len(refs) // 2
        for src, dst in zip(refs[:n], refs[n:], strict=True):
            dst[...] = src[...]

    shapes = tuple(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in arrays)
    return pl.pallas_call(body, out_shape=shapes, interpret=interpret)(*arrays)


def _xla_gmm(lhs, rhs, group_sizes, preferred_element_type, group_offset, transpose_rhs):
    rows = jnp.arange(lhs.shape[0])
    row_group = jnp.sum(rows[:, None] >= jnp.cumsum(group_sizes)[None, :], axis=1)
    local = row_group - (0 if group_offset is None else group_offset)
    onehot = (local[:, None] == jnp.arange(rhs.shape[0])[None, :]).astype(jnp.float32)
    out = grouped_matmul(lhs.astype(jnp.float32), rhs.astype(jnp.float32), onehot,
                         transpose_rhs)
    return out.astype(preferred_element_type)


def _xla_softmax(x):
    return jax.nn.softmax(x.astype(jnp.float32), axis=-1).astype(x.dtype)


def copy_softmax(x, *, axis=-1, interpret=False):
    """``jax.nn.softmax`` in XLA, copied by a kernel."""
    return _copy((_xla_softmax(x),), interpret)[0]


def rowmax_softmax(x, *, axis=-1, interpret=False):
    """A kernel computes each row's max; XLA does exp, the sum and the division."""
    def body(x_ref, m_ref):
        m_ref[...] = jnp.max(x_ref[...].astype(jnp.float32), axis=-1, keepdims=True)

    m = pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct((*x.shape[:-1], 1), jnp.float32),
                       interpret=interpret)(x)
    e = jnp.exp(x.astype(jnp.float32) - m)
    return (e / jnp.sum(e, axis=-1, keepdims=True)).astype(x.dtype)


def _exp_by_bits(y):
    """exp(y) for y <= 0 from adds, multiplies, a floor and a bitcast (no measured
    primitive): 2^f by a polynomial, 2^n by the exponent bits."""
    t = jnp.maximum(y * np.float32(1.4426950408889634), -126.0)
    n = jnp.floor(t)
    f = (t - n) * np.float32(0.6931471805599453)
    poly = 1.0
    for k in range(9, 0, -1):  # Horner: sum of f^k / k!
        poly = 1.0 + f * poly * np.float32(1 / k)
    scale = jax.lax.bitcast_convert_type((n.astype(jnp.int32) + 127) << 23, jnp.float32)
    return poly * scale


def _fold_sum(e):
    """The row sums of ``e`` by halving folds of adds (no reduction)."""
    n = 1 << max(e.shape[-1] - 1, 0).bit_length()
    e = jnp.pad(e, [(0, 0)] * (e.ndim - 1) + [(0, n - e.shape[-1])])
    while e.shape[-1] > 1:
        e = e[..., : e.shape[-1] // 2] + e[..., e.shape[-1] // 2:]
    return e


def _reciprocal(s):
    """1/s for s >= 1 by Newton steps from a bit-level guess (no division)."""
    guess = jax.lax.bitcast_convert_type(
        np.int32(0x7EF311C7) - jax.lax.bitcast_convert_type(s, jnp.int32), jnp.float32)
    for _ in range(4):
        guess = guess * (2.0 - s * guess)
    return guess


def unmeasured_copy_softmax(x, *, axis=-1, interpret=False):
    """The softmax in XLA spelled without one measured primitive (exp from bits, sums by
    folds, a Newton reciprocal), copied by a kernel: nothing outside is measured, so only
    the op's core declared inside the kernel (exp, reduce_sum) fails it."""
    xf = x.astype(jnp.float32)
    m = xf
    while m.shape[-1] > 1:  # the row max by folds too
        half = (m.shape[-1] + 1) // 2
        m = jnp.maximum(m[..., :half], jnp.concatenate(
            [m[..., half:], m[..., :1]], axis=-1)[..., :half])
    e = _exp_by_bits(xf - m)
    return _copy(((e * _reciprocal(_fold_sum(e))).astype(x.dtype),), interpret)[0]


def cancelled_core_softmax(x, *, axis=-1, interpret=False):
    """``jax.nn.softmax`` in XLA, copied by a kernel that also computes the op's core (the
    exponentials and their row sums) and adds ``min(e, 0)`` and ``0 * sum``, exactly 0: the
    core is computed in the kernel and flows into its result, but cancelled. Only
    perturbing it inside the kernel body shows that the result does not use it."""
    return pl.pallas_call(_cancelled_body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          interpret=interpret)(x, _xla_softmax(x))


def _cancelled_body(x_ref, a_ref, o_ref):
    """Copies the answer, adding the core's ``min(e, 0)`` and ``0 * sum`` (exactly 0)."""
    xf = x_ref[...].astype(jnp.float32)
    e = jnp.exp(xf - jnp.max(xf, axis=-1, keepdims=True))
    total = jnp.sum(e, axis=-1, keepdims=True)
    o_ref[...] = (a_ref[...].astype(jnp.float32) + jnp.minimum(e, 0.0)
                  + 0.0 * total).astype(o_ref.dtype)


def cancelled_core_softmax_tpu_interpreted(x, *, axis=-1, interpret=False):
    """:func:`cancelled_core_softmax` run on the TPU interpreter's settings
    (``interpret=pltpu.InterpretParams()``, what jax's TPU kernels and flash pass) rather
    than ``interpret=True``: the core is judged under any interpret setting."""
    from jax.experimental.pallas import tpu as pltpu

    return pl.pallas_call(_cancelled_body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          interpret=pltpu.InterpretParams())(x, _xla_softmax(x))


def _numpy_softmax(x):
    x = np.asarray(x, np.float32)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def callback_softmax(x, *, axis=-1, interpret=False):
    """The answer from numpy through a ``pure_callback``, copied by a kernel."""
    out = jax.pure_callback(_numpy_softmax, jax.ShapeDtypeStruct(x.shape, jnp.float32), x)
    return _copy((out.astype(x.dtype),), interpret)[0]


def xla_norm(op, x, weight, bias, eps):
    """layer_norm or rms_norm in float32 XLA, stored in x's dtype."""
    xf = x.astype(jnp.float32)
    if op == "layer_norm":
        xf = xf - jnp.mean(xf, axis=-1, keepdims=True)
        var = jnp.mean(jnp.square(xf), axis=-1, keepdims=True)
    else:
        var = jnp.mean(jnp.square(xf), axis=-1, keepdims=True)
    out = xf * jax.lax.rsqrt(var + eps) * weight.astype(jnp.float32)
    if op == "layer_norm":
        out = out + bias.astype(jnp.float32)
    return out.astype(x.dtype)


def copy_norm(op, x, weight, bias, *, eps, interpret):
    """The norm and its gradients in XLA, each copied by a kernel (forward: one; backward:
    one per gradient)."""
    @jax.custom_vjp
    def f(x, w, b):
        return _copy((xla_norm(op, x, w, b, eps),), interpret)[0]

    def bwd(res, g):
        grads = jax.vjp(lambda *a: xla_norm(op, *a, eps), *res)[1](g)
        return tuple(_copy((d,), interpret)[0] for d in grads)

    f.defvjp(lambda x, w, b: (f(x, w, b), (x, w, b)), bwd)
    return f(x, weight, bias)


def copy_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
             existing_out, transpose_rhs, interpret):
    """The grouped matmul and its gradients in XLA, each copied by a kernel (the group
    sizes and the group offset pass through the custom VJP as arguments: its backward
    closes over no traced value)."""
    def xla(a, b, sizes, offset):
        return _xla_gmm(a, b, sizes, preferred_element_type, offset, transpose_rhs)

    @jax.custom_vjp
    def f(a, b, sizes, offset):
        return _copy((xla(a, b, sizes, offset),), interpret)[0]

    def bwd(res, g):
        a, b, sizes, offset = res
        grads = jax.vjp(lambda a, b: xla(a, b, sizes, offset), a, b)[1](g)
        return (*(_copy((d,), interpret)[0] for d in grads), None, None)

    f.defvjp(lambda *args: (f(*args), args), bwd)
    offset = jnp.asarray(0 if group_offset is None else group_offset, jnp.int32)
    return f(lhs, rhs, group_sizes, offset)


def copy_mha(q, k, v, segment_ids, *, sm_scale, causal, return_residuals=False,
             interpret=False, **kw):
    """Attention (out and its log-sum-exp) and its gradients in XLA, each copied by a
    kernel (no segment ids)."""
    @jax.custom_vjp
    def f(q, k, v):
        return _copy(xla_attention(q, k, v, sm_scale, causal), interpret)

    def bwd(res, g):
        grads = jax.vjp(lambda *a: xla_attention(*a, sm_scale, causal)[0], *res)[1](g[0])
        return tuple(_copy((d,), interpret)[0] for d in grads)

    f.defvjp(lambda q, k, v: (f(q, k, v), (q, k, v)), bwd)
    out, lse = f(q, k, v)
    return (out, lse) if return_residuals else out
