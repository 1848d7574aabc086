"""Planted implementations that run plain JAX instead of their Pallas kernel (the silent
fallbacks of issue 36), declared ones, and kernels whose ``pallas_call`` sits deep in
higher-order primitives: ``--impl`` targets of gpu-softmax and gpu-norm."""

from __future__ import annotations

import jax
import jax.numpy as jnp

import kernel_harness
from kernel_harness.families.gpu_common import is_pow2, triton_op

# jax's Pallas Triton ops, looked up as the gpu-* families do: on a jax without them
# (>= 0.12.1) this module still imports (its other impls work) and these raise.
_layer_norm = triton_op("layer_norm")
_rms_norm = triton_op("rms_norm")
_softmax = triton_op("softmax")


def xla_softmax(x, *, axis=-1, interpret=False):
    """No Pallas anywhere: ``jax.nn.softmax`` in float32, stored in x's dtype (it matches
    the reference as well as the kernel does)."""
    return jax.nn.softmax(x.astype(jnp.float32), axis=axis).astype(x.dtype)


def pow2_only_softmax(x, *, axis=-1, interpret=False):
    """The Pallas kernel for rows whose length is a power of two, plain JAX for the others
    (a library that falls back for the shapes its kernel does not handle)."""
    if is_pow2(x.shape[-1]):
        return _softmax.softmax(x, axis=axis, interpret=interpret)
    return xla_softmax(x, axis=axis)


declared_pow2_only_softmax = kernel_harness.fallback(
    "rows whose length is not a power of two run jax.nn.softmax")(
    lambda x, *, axis=-1, interpret=False: pow2_only_softmax(x, axis=axis,
                                                             interpret=interpret))

declared_xla_softmax = kernel_harness.fallback("no kernel yet: jax.nn.softmax throughout")(
    lambda x, *, axis=-1, interpret=False: xla_softmax(x, axis=axis))


def deep_softmax(x, *, axis=-1, interpret=False):
    """The Pallas kernel, inside a jit, a cond on a traced predicate and a one-step scan:
    the counter must find it there."""
    def kernel(x):
        return _softmax.softmax(x, axis=axis, interpret=interpret)

    def step(carry, _):
        # (a traced predicate, from an iota: a wrapper that tested the data's values would
        # be math outside, gpu-softmax's wrapper being layout only)
        out = jax.lax.cond(jnp.arange(carry.shape[-1])[0] == 0, kernel, kernel, carry)
        return out, None

    return jax.jit(lambda x: jax.lax.scan(step, x, None, length=1)[0])(x)


def xla_backward_norm(op, x, weight, bias, *, eps, interpret):
    """The Pallas forward, the backward as XLA autodiff (``backward_pass_impl="xla"``)."""
    fn = _layer_norm.layer_norm if op == "layer_norm" else _rms_norm.rms_norm
    return fn(x, weight, bias, eps=eps, backward_pass_impl="xla", interpret=interpret)


def xla_flash(q, k, v, ab=None, segment_ids=None, *, causal, sm_scale, block_sizes):
    """flash's signature, no Pallas anywhere: softmax attention in plain JAX (a selection
    that claims flash but runs this must not pass)."""
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k, preferred_element_type=jnp.float32) * sm_scale
    if ab is not None:
        s = s + ab
    keep = jnp.ones(s.shape[-2:], bool)
    if causal:
        keep = jnp.tril(keep, k.shape[2] - q.shape[2])
    keep = jnp.broadcast_to(keep, s.shape)
    if segment_ids is not None:
        keep = keep & (segment_ids.q[:, None, :, None] == segment_ids.kv[:, None, None, :])
    p = jax.nn.softmax(jnp.where(keep, s, -1e30), axis=-1)
    return jnp.einsum("bhqk,bhkd->bhqd", p.astype(v.dtype), v).astype(q.dtype)


_calls = [0]


def kernel_every_other_call(x, *, axis=-1, interpret=False):
    """The Pallas kernel on every second call, plain JAX on the others: a counter that
    traced the call again after the real one counted the kernel of a program that never
    ran (issue 55: an impl that behaves differently when observed)."""
    _calls[0] += 1
    if _calls[0] % 2:
        return xla_softmax(x, axis=axis)
    return _softmax.softmax(x, axis=axis, interpret=interpret)


def kernel_when_counted(x, *, axis=-1, interpret=False):
    """The Pallas kernel only where the harness's count is on the stack (the counting
    trace), plain JAX in every other call."""
    import traceback

    if any("kernel_count" in frame.filename for frame in traceback.extract_stack()):
        return _softmax.softmax(x, axis=axis, interpret=interpret)
    return xla_softmax(x, axis=axis)
