"""gpu-softmax implementations with their own row kernel (jax's, with knobs), whose
kernel body changes with the size: what ``kernel_harness.checks.kernel_bodies`` compares
with how the family's own kernel changes (round 11 of the adversarial set)."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plgpu


def _row(x_ref, o_ref, *, block, bound, gain, exp_dtype, base2):
    lanes = jnp.arange(block)
    row = plgpu.load(x_ref.at[pl.ds(0, block)], mask=lanes < x_ref.shape[-1],
                     other=-jnp.inf)
    row = jnp.where(lanes < bound, row, -jnp.inf)
    shifted = (row - jnp.max(row)).astype(jnp.float32)  # as jax's kernel: exp in float32
    if base2:
        e = jnp.exp2(shifted * math.log2(math.e))
    else:
        e = jnp.exp(shifted.astype(exp_dtype)).astype(jnp.float32)
    plgpu.store(o_ref.at[pl.ds(0, block)], (e / jnp.sum(e) * gain).astype(o_ref.dtype),
                mask=lanes < x_ref.shape[-1])


def _softmax(x, *, interpret, bound=None, gain=1.0, exp_dtype=None, base2=False,
             widen=1):
    n = x.shape[-1]
    kernel = functools.partial(_row, block=pl.next_power_of_2(n) * widen,
                               bound=n if bound is None else bound, gain=gain,
                               exp_dtype=exp_dtype or jnp.float32, base2=base2)
    f = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((n,), x.dtype),
                       interpret=interpret)
    for _ in range(x.ndim - 1):
        f = jax.vmap(f)
    return f(x)


def _rows(x):
    return math.prod(x.shape[:-1])


def gain_past_rows(x, *, axis=-1, interpret=False):
    """Probabilities times 0.75 past 16384 rows (a constant in the kernel body)."""
    return _softmax(x, interpret=interpret, gain=0.75 if _rows(x) > 16384 else 1.0)


def last_logit_dropped(x, *, axis=-1, interpret=False):
    """The last logit of every row left out past 8 rows of 1025 logits (a mask bound)."""
    n = x.shape[-1]
    return _softmax(x, interpret=interpret,
                    bound=n - 1 if _rows(x) > 8 and n > 1025 else n)


def bf16_exp_past_rows(x, *, axis=-1, interpret=False):
    """Exponentials taken in bfloat16 past 8 rows of 1025 logits (a cast in the kernel
    body)."""
    return _softmax(x, interpret=interpret, exp_dtype=jnp.bfloat16
                    if _rows(x) > 8 and x.shape[-1] > 1025 else None)


def base_two(x, *, axis=-1, interpret=False):
    """Honest: exp2 of the scaled logits at every size (its own constants, the same at
    every size)."""
    return _softmax(x, interpret=interpret, base2=True)


def wider_block_past_rows(x, *, axis=-1, interpret=False):
    """Honest: a block twice as wide past 4096 logits (another block, the same math)."""
    return _softmax(x, interpret=interpret, widen=2 if x.shape[-1] > 4096 else 1)


def _zero_rows_past(limit_ref, x_ref, o_ref):
    keep = jax.lax.broadcasted_iota(jnp.int32, x_ref.shape, 0) < limit_ref[0]
    o_ref[...] = jnp.where(keep, x_ref[...], 0).astype(o_ref.dtype)


def epilogue_row_limit(x, *, axis=-1, interpret=False):
    """The family's kernel, then a kernel of its own zeroing every row past 1024, handed
    the bound as an operand (its body the same at every size, no constant in it: what it
    does is seen only by running it at a size past 1024 rows, its other kernel stood in
    for)."""
    from kernel_harness.families.gpu_softmax.kernel import softmax

    out = softmax(x, axis=axis, interpret=interpret)
    flat = out.reshape(-1, out.shape[-1])
    flat = pl.pallas_call(_zero_rows_past,
                          out_shape=jax.ShapeDtypeStruct(flat.shape, flat.dtype),
                          interpret=interpret)(jnp.full((1,), 1024, jnp.int32), flat)
    return flat.reshape(out.shape)


def renormalized_below_rows(x, *, axis=-1, interpret=False):
    """The family's kernel, its rows divided by their sum up to 16384 rows and not past
    (a division the wrapper drops past a size: nothing appears there, something goes)."""
    from kernel_harness.families.gpu_softmax.kernel import softmax

    out = softmax(x, axis=axis, interpret=interpret)
    if _rows(x) > 16384:
        return out
    return out / jnp.sum(out, axis=-1, keepdims=True)


def _gated_row(x_ref, o_ref, *, block):
    lanes = jnp.arange(block)
    row = plgpu.load(x_ref.at[pl.ds(0, block)], mask=lanes < x_ref.shape[-1],
                     other=-jnp.inf)
    top = jnp.max(row)
    e = jnp.exp((row - top).astype(jnp.float32))
    p = e / jnp.sum(e)
    p = jnp.where(top.astype(jnp.float32) > 1e7, p.astype(jnp.bfloat16).astype(p.dtype), p)
    plgpu.store(o_ref.at[pl.ds(0, block)], p.astype(o_ref.dtype),
                mask=lanes < x_ref.shape[-1])


def rounded_past_1e7(x, *, axis=-1, interpret=False):
    """Probabilities rounded to bfloat16 for rows whose largest logit passes 1e7: a value
    gate no menu or anywhere draw is sure to reach; the constant is in its program."""
    n = x.shape[-1]
    f = pl.pallas_call(functools.partial(_gated_row, block=pl.next_power_of_2(n)),
                       out_shape=jax.ShapeDtypeStruct((n,), x.dtype), interpret=interpret)
    for _ in range(x.ndim - 1):
        f = jax.vmap(f)
    return f(x)


def rolled_by_its_bits(x, *, axis=-1, interpret=False):
    """The family's kernel, its result rolled along the row by a shift read from the bits
    of the first logit (0 for every drawn value but one: a wrapper that chooses by the
    data's values, round 13 of the adversarial set)."""
    from kernel_harness.families.gpu_softmax.kernel import softmax

    out = softmax(x, axis=axis, interpret=interpret)
    first = jax.lax.bitcast_convert_type(x.reshape(-1)[0].astype(jnp.float32), jnp.uint32)
    shift = (first == jnp.uint32(0x3FC90FDB)).astype(jnp.int32)  # pi/2's bits
    doubled = jnp.concatenate([out, out], axis=-1)
    return jax.lax.dynamic_slice_in_dim(doubled, shift, out.shape[-1], axis=out.ndim - 1)
