"""Planted cheats wrong only on values the old menus never drew (issue 55, item 6): the
families' pristine kernels, and a choice made in a kernel of its own
(:func:`tests.helpers.in_kernel.epilogue`) on values a strategy reaches only since it
draws them: a masked leading block of 128 logits, a segment of length 1, rows offset by
many spreads."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from tests.helpers.generic_cheats import mha, norm, softmax
from tests.helpers.in_kernel import INTS, add_bits, epilogue, exponent_mask


def _zero_dead(out: jax.Array, head: jax.Array, minus_inf: jax.Array, long: jax.Array
               ) -> jax.Array:
    dead = jnp.all(head == minus_inf, axis=-1, keepdims=True) & (long > 0)
    return jnp.where(dead, jnp.zeros_like(out), out)


_zeroed_where_dead = epilogue(_zero_dead)


def zero_after_a_masked_block(x, *, axis=-1, interpret=False):
    """The gpu-softmax kernel, zeros in every row whose whole first 128-lane block is -inf
    (a blockwise softmax whose running sum starts from a dead block); only a masked
    prefix of 128 or more shows it. Zeros, not NaN: a case whose every row is dead would
    then be all NaN, which poisoning names first (no kernel writes it). The choice is made
    in a kernel of its own (:func:`epilogue`), as a blockwise kernel's would be."""
    out = softmax(x, axis=axis, interpret=interpret)
    n = x.shape[-1]
    return _zeroed_where_dead(out, x[..., :min(n, 128)], jnp.full((1,), -jnp.inf, x.dtype),
                              jnp.full((1,), int(n > 128), jnp.int32))


def _nan_where_alone(o: jax.Array, ids: jax.Array, nan: jax.Array) -> jax.Array:
    left = jnp.concatenate([jnp.full_like(ids[:, :1], -1), ids[:, :-1]], axis=1)
    right = jnp.concatenate([ids[:, 1:], jnp.full_like(ids[:, :1], -1)], axis=1)
    alone = (ids != left) & (ids != right)  # [batch, len]
    alone = alone.reshape(alone.shape + (1,) * (o.ndim - 2)) if o.shape[1] == ids.shape[1] \
        else alone.reshape(alone.shape[:1] + (1,) + alone.shape[1:])  # lse: [batch, heads, len]
    return jnp.where(alone, nan.astype(o.dtype), o)


_nan_where_alone_in_kernel = epilogue(_nan_where_alone)


def nan_at_length_1_segments(q, k, v, segment_ids, *, return_residuals=False, **kw):
    """The gpu-mha kernel, NaN at every query alone in its segment run (its neighbours'
    ids differ): only a segment of length 1 shows it. The ids are read in a kernel of its
    own (:func:`epilogue`): gpu-mha's wrapper only passes them on."""
    res = mha(q, k, v, segment_ids, return_residuals=return_residuals, **kw)
    if segment_ids is None or q.shape[1] != k.shape[1]:
        return res
    nan = jnp.full((1,), jnp.nan, jnp.float32)
    if not return_residuals:
        return _nan_where_alone_in_kernel(res, segment_ids, nan)
    out, lse = res
    return (_nan_where_alone_in_kernel(out, segment_ids, nan),
            _nan_where_alone_in_kernel(lse, segment_ids, nan))


def _double_one_sign(out: jax.Array, x: jax.Array, exponent: jax.Array, step: jax.Array,
                     long: jax.Array) -> jax.Array:
    sign = jax.lax.bitcast_convert_type(x, exponent.dtype) < 0  # its sign bit
    one_sign = jnp.all(sign, axis=-1, keepdims=True) | jnp.all(~sign, axis=-1, keepdims=True)
    steps = jnp.where(one_sign & (long > 0), step, jnp.zeros_like(step))
    return add_bits(out, steps, exponent)


_doubled_where_one_sign = epilogue(_double_one_sign)


def doubled_at_offset_rows(op, x, weight, bias, *, eps, interpret):
    """The gpu-norm kernels, doubled in every row of 16 or more values of one sign (a mean
    offset by many spreads: a norm that loses such rows to cancellation); the choice is
    made in a kernel of its own (:func:`epilogue`)."""
    out = norm(op, x, weight, bias, eps=eps, interpret=interpret)
    ints = INTS[out.dtype.itemsize]
    return _doubled_where_one_sign(
        out, x.astype(out.dtype), jnp.full((1,), exponent_mask(out.dtype), ints),
        jnp.full((1,), 1 << jnp.finfo(out.dtype).nmant, ints),
        jnp.full((1,), int(x.shape[-1] >= 16), jnp.int32))
