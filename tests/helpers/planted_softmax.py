"""Planted softmax precision bugs (impls of the gpu-softmax signature) for the calibrated
judge's tests."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def denominator_in_input_dtype(x, *, axis=-1, interpret=False):
    """exp in float32, but the denominator accumulated one term at a time in x's dtype
    (every partial sum rounded), then divided in float32 and stored in x's dtype."""
    diff = x - jnp.max(x, axis=-1, keepdims=True)
    e = jnp.exp(diff.astype(jnp.float32))
    terms = jnp.moveaxis(e.astype(x.dtype), -1, 0)

    def add(total, term):
        return (total + term).astype(x.dtype), None

    total, _ = jax.lax.scan(add, jnp.zeros(terms.shape[1:], x.dtype), terms)
    return (e / total.astype(jnp.float32)[..., None]).astype(x.dtype)


def _nan_where_dead(out, head, nan, long):
    dead = jnp.isneginf(jnp.maximum(head[..., :1], head[..., -1:])) & (long > 0)
    return jnp.where(dead, nan.astype(out.dtype), out)


def nan_after_a_masked_block(x, *, axis=-1, interpret=False):
    """The real kernel's result, but NaN in every row whose whole first 128-lane block is
    -inf: what a blockwise (online) softmax gives when a block's max is -inf and it
    computes exp(-inf - (-inf)). The block is told dead by its first and last lanes (a
    masked prefix is contiguous), in a kernel of its own after the real one (a layout-only
    family's wrapper that tested the values would be math outside); rows of 128 or fewer
    are left alone."""
    from jax.experimental.pallas.ops.gpu.softmax import softmax

    from tests.helpers.in_kernel import epilogue

    out = softmax(x, axis=axis, interpret=interpret)
    n = x.shape[-1]
    return epilogue(_nan_where_dead)(out, x[..., :min(n, 128)],
                                     jnp.full((1,), jnp.nan, jnp.float32),
                                     jnp.full((1,), int(n > 128), jnp.int32))


def ghost_past_2048(x, *, axis=-1, interpret=False):
    """The real kernel only for rows a test draws (up to 2048 logits); longer rows plain
    XLA, correct but no kernel: the ghost branch of a generated kernel."""
    from jax.experimental.pallas.ops.gpu.softmax import softmax

    if x.shape[-1] > 2048:
        return jax.nn.softmax(x, axis=axis)
    return softmax(x, axis=axis, interpret=interpret)


def concatenated_past_2048(x, *, axis=-1, interpret=False):
    """The real kernel on the first 2048 logits of a long row, XLA's softmax on the rest,
    the two halves concatenated (each renormalized wrongly: a shape-specialised shortcut)."""
    from jax.experimental.pallas.ops.gpu.softmax import softmax

    if x.shape[-1] <= 2048:
        return softmax(x, axis=axis, interpret=interpret)
    head = softmax(x[..., :2048], axis=axis, interpret=interpret)
    return jnp.concatenate([head, jax.nn.softmax(x[..., 2048:], axis=axis)], axis=-1)
