"""What a planted cheat does to a kernel's result, done inside a kernel of its own: a
layout-only family's wrapper that reads the data's values (or an integer input it only
passes on) is math outside the kernel, so a cheat of another class (nondeterministic,
flaky, wrong on values never drawn...) makes its choice where a real kernel's bug would,
and is named for its own class. Integers come in as operands, never as literals in the
body (a body's integer literal is judged as a bound: ``checks/kernel_bodies``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

INTS = {2: jnp.int16, 4: jnp.int32, 8: jnp.int64}


def in_kernel(fn: Callable[..., jax.Array], *operands: jax.Array) -> jax.Array:
    """``fn(*operands)`` computed inside one Pallas kernel over whole arrays (a scalar
    operand as one element): what the cheat does to the kernel's result is a kernel's own
    work, so a layout-only family's wrapper reads no value and the cheat is named for its
    own class, not "math outside the kernel". Its integers come in as operands, never as
    literals in the body (a body's integer literal is judged as a bound)."""
    operands = tuple(jnp.reshape(o, (1,)) if jnp.ndim(o) == 0 else o for o in operands)

    def body(*refs: Any) -> None:
        refs[-1][...] = fn(*(r[...] for r in refs[:-1]))

    # interpreted wherever it runs: a planted cheat needs no accelerator, and a backend
    # test in its source would be named first (the source check: "branches on the backend")
    return pl.pallas_call(body, out_shape=jax.eval_shape(fn, *operands),
                          interpret=True)(*operands)


def add_bits(o: jax.Array, steps: jax.Array, exponent: jax.Array) -> jax.Array:
    bits = jax.lax.bitcast_convert_type(o, exponent.dtype)
    moved = ((bits & exponent) != exponent) & ((bits << 1) != 0)  # finite, not zero
    return jax.lax.bitcast_convert_type(jnp.where(moved, bits + steps, bits), o.dtype)


def epilogue(fn: Callable[..., jax.Array]) -> Callable[..., jax.Array]:
    """``fn(o, *extra)`` on a kernel's result ``o``, inside a kernel of its own
    (:func:`in_kernel`); its gradient is ``o``'s own (the kernel's), none through ``extra``."""
    @jax.custom_vjp
    def after(o: jax.Array, *extra: jax.Array) -> jax.Array:
        return in_kernel(fn, o, *extra)

    def forward(o: jax.Array, *extra: jax.Array) -> tuple[jax.Array, tuple[None, ...]]:
        return after(o, *extra), (None,) * len(extra)

    after.defvjp(forward, lambda nones, g: (g, *nones))
    return after


_bits_added = epilogue(add_bits)


def bits_added(o: jax.Array, steps: jax.Array) -> jax.Array:
    """``o`` with the integer ``steps`` (a scalar, or one per row) added to each finite
    non-zero element's bit pattern (ulps; ``steps << mantissa bits`` doubles it), in integer
    arithmetic inside a kernel of its own (:func:`in_kernel`). Its gradient is ``o``'s own
    (the kernel's)."""
    ints = INTS[o.dtype.itemsize]
    return _bits_added(o, jnp.asarray(steps).astype(ints),
                       jnp.full((1,), exponent_mask(o.dtype), ints))


def exponent_mask(dtype: Any) -> int:
    info = jnp.finfo(dtype)
    return ((1 << info.nexp) - 1) << info.nmant


def doubled(o: jax.Array) -> jax.Array:
    """``o`` times 2 where finite and normal (its exponent plus one), in integer arithmetic."""
    return bits_added(o, jnp.int32(1 << jnp.finfo(o.dtype).nmant))
