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


def nan_after_a_masked_block(x, *, axis=-1, interpret=False):
    """The real kernel's result, but NaN in every row whose whole first 128-lane block is
    -inf: what a blockwise (online) softmax gives when a block's max is -inf and it
    computes exp(-inf - (-inf)). The block is told dead by its first and last lanes (a
    masked prefix is contiguous): a test of every lane is elementwise work outside the
    kernel on an eighth of the problem, which the layout-only measure names first."""
    from jax.experimental.pallas.ops.gpu.softmax import softmax

    out = softmax(x, axis=axis, interpret=interpret)
    if x.shape[-1] <= 128:
        return out
    dead = jnp.isneginf(jnp.maximum(x[..., :1], x[..., 127:128]))
    return jnp.where(dead, jnp.nan, out)


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
