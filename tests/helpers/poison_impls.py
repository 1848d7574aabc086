"""Planted implementations that launch their Pallas kernel yet return plain JAX's answer
(issue 55): the kernel's result thrown away, times zero plus XLA's, the kernel in a
``while`` that runs no trip, or in a ``cond`` branch the input does not take; for
gpu-softmax, megablox-gmm and gpu-mha (forward, and a backward kernel whose gradients are
thrown away). Each runs as many kernels as the pristine one, so the count passes them."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.experimental.pallas.ops.tpu.megablox import ops as _gmm_ops

from kernel_harness.families.gpu_common import triton_op
from kernel_harness.ops.grouped_matmul.reference import grouped_matmul

# jax's Pallas Triton ops, looked up as the gpu-* families do: on a jax without them
# (>= 0.12.1) this module still imports (its other impls work) and these raise.
_attention = triton_op("attention")
_softmax = triton_op("softmax")


def _xla_softmax(x):
    return jax.nn.softmax(x.astype(jnp.float32), axis=-1).astype(x.dtype)


def _kernel(x, interpret):
    return _softmax.softmax(x, axis=-1, interpret=interpret)


def thrown_softmax(x, *, axis=-1, interpret=False):
    """Runs the kernel, returns ``jax.nn.softmax``."""
    _kernel(x, interpret)
    return _xla_softmax(x)


def times_zero_softmax(x, *, axis=-1, interpret=False):
    """The kernel's result times zero plus ``jax.nn.softmax`` (NaN-poisoning would miss it)."""
    return _kernel(x, interpret) * 0 + _xla_softmax(x)


def zero_trip_softmax(x, *, axis=-1, interpret=False):
    """The kernel in a ``while`` whose test (a probability above 2) never holds."""
    return jax.lax.while_loop(lambda p: jnp.any(p > 2), lambda p: _kernel(p, interpret),
                              _xla_softmax(x))


def untaken_cond_softmax(x, *, axis=-1, interpret=False):
    """The kernel's result in the branch of a ``cond`` no finite input takes; the branch
    taken launches the kernel too (the count takes a cond's poorest branch) and drops it."""
    def taken(x):
        _kernel(x, interpret)
        return _xla_softmax(x)

    return jax.lax.cond(jnp.all(jnp.isinf(x)), lambda x: _kernel(x, interpret), taken, x)


def _xla_gmm(lhs, rhs, group_sizes, preferred_element_type, group_offset, transpose_rhs):
    rows = jnp.arange(lhs.shape[0])
    row_group = jnp.sum(rows[:, None] >= jnp.cumsum(group_sizes)[None, :], axis=1)
    local = row_group - (0 if group_offset is None else group_offset)
    onehot = (local[:, None] == jnp.arange(rhs.shape[0])[None, :]).astype(jnp.float32)
    out = grouped_matmul(lhs.astype(jnp.float32), rhs.astype(jnp.float32), onehot,
                         transpose_rhs)
    return out.astype(preferred_element_type)


def thrown_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
               existing_out, transpose_rhs, interpret):
    """Runs megablox gmm, returns the grouped matmul in plain JAX (gradients by its
    autodiff)."""
    _gmm_ops.gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                 existing_out, transpose_rhs, interpret)
    return _xla_gmm(lhs, rhs, group_sizes, preferred_element_type, group_offset,
                    transpose_rhs)


def times_zero_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                   existing_out, transpose_rhs, interpret):
    """megablox gmm times zero plus the plain-JAX grouped matmul."""
    out = _gmm_ops.gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                       existing_out, transpose_rhs, interpret)
    return out * 0 + _xla_gmm(lhs, rhs, group_sizes, preferred_element_type, group_offset,
                              transpose_rhs)


def thrown_backward_gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset,
                        existing_out, transpose_rhs, interpret):
    """megablox gmm forward; its backward runs megablox's backward kernels and returns
    plain JAX's gradients instead."""
    def kernel(a, b, sizes):
        return _gmm_ops.gmm(a, b, sizes, preferred_element_type, tiling, group_offset,
                            existing_out, transpose_rhs, interpret)

    def xla(a, b, sizes):
        return _xla_gmm(a, b, sizes, preferred_element_type, group_offset, transpose_rhs)

    @jax.custom_vjp
    def f(a, b, sizes):
        return kernel(a, b, sizes)

    def fwd(a, b, sizes):
        return kernel(a, b, sizes), (a, b, sizes)

    def bwd(res, g):  # the group sizes come through the residuals, not a closure
        a, b, sizes = res
        jax.vjp(lambda a, b: kernel(a, b, sizes), a, b)[1](g)
        return (*jax.vjp(lambda a, b: xla(a, b, sizes), a, b)[1](g), None)

    f.defvjp(fwd, bwd)
    return f(lhs, rhs, group_sizes)


def xla_attention(q, k, v, sm_scale, causal):
    """Softmax attention in float32: out [batch, q_len, heads, d] in q's dtype, and the
    log-sum-exp in base 2 [batch, heads, q_len] (the kernel's residual)."""
    hi = jax.lax.Precision.HIGHEST
    s = jnp.einsum("bqhd,bkhd->bhqk", q.astype(jnp.float32), k.astype(jnp.float32),
                   precision=hi) * sm_scale
    if causal:
        seen = jnp.arange(q.shape[1])[:, None] >= jnp.arange(k.shape[1])[None, :]
        s = jnp.where(seen, s, -jnp.inf)
    lse = jax.nn.logsumexp(s, axis=-1)
    out = jnp.einsum("bhqk,bkhd->bqhd", jnp.exp(s - lse[..., None]), v.astype(jnp.float32),
                     precision=hi)
    return out.astype(q.dtype), lse / jnp.log(2.0)


def thrown_mha(q, k, v, segment_ids, *, sm_scale, causal, return_residuals=False, **kw):
    """Runs the Pallas GPU ``mha``, returns plain JAX's attention (no segment ids)."""
    _attention.mha(q, k, v, segment_ids, sm_scale=sm_scale, causal=causal,
                   return_residuals=return_residuals, **kw)
    out, lse = xla_attention(q, k, v, sm_scale, causal)
    return (out, lse) if return_residuals else out


def thrown_backward_mha(q, k, v, segment_ids, *, sm_scale, causal, return_residuals=False,
                        **kw):
    """The Pallas GPU ``mha`` forward; its backward runs the kernel's backward and returns
    plain JAX's gradients instead (the segment ids pass through the custom VJP as an
    argument: its backward closes over no traced value)."""
    def kernel(q, k, v, segment_ids):
        return _attention.mha(q, k, v, segment_ids, sm_scale=sm_scale, causal=causal, **kw)

    if return_residuals:
        return _attention.mha(q, k, v, segment_ids, sm_scale=sm_scale, causal=causal,
                              return_residuals=True, **kw)

    @jax.custom_vjp
    def f(q, k, v, segment_ids):
        return kernel(q, k, v, segment_ids)

    def bwd(res, g):
        q, k, v, segment_ids = res
        jax.vjp(lambda *a: kernel(*a, segment_ids), q, k, v)[1](g)
        grads = jax.vjp(lambda *a: xla_attention(*a, sm_scale, causal)[0], q, k, v)[1](g)
        return (*grads, None)

    f.defvjp(lambda *a: (kernel(*a), a), bwd)
    return f(q, k, v, segment_ids)
