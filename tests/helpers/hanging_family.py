"""Planted kernels that never return, as families (``--family-module
tests.helpers.hanging_family``): one hangs inside XLA (an endless ``lax.while_loop``), one
inside a Pallas interpreter loop; plus the passing toy family, to show the run goes on."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from tests.helpers.toy_family import FAMILY as TOY
from tests.helpers.toy_family import softplus


def _forever(x: jax.Array) -> jax.Array:
    # The condition depends on data and the result on the counter, so XLA can neither fold
    # nor drop the loop; the counter only grows (and stalls at 2**24), so it never ends.
    count = jax.lax.while_loop(lambda c: c > -1.0, lambda c: c + 1.0, jnp.abs(x[0]))
    return x + jnp.minimum(count, 0.0)


@jax.custom_vjp
def hangs_in_xla(x):
    """softplus after an endless loop in XLA (jit-compiled, so Python cannot interrupt it)."""
    return softplus(jax.jit(_forever)(x))


hangs_in_xla.defvjp(lambda x: (hangs_in_xla(x), x), lambda x, g: (g * jax.nn.sigmoid(x),))


def _pallas_forever_kernel(x_ref, o_ref):
    o_ref[...] = _forever(x_ref[...])


@jax.custom_vjp
def hangs_in_pallas(x):
    """softplus after a Pallas kernel (interpret mode) whose loop never ends."""
    y = pl.pallas_call(_pallas_forever_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                       interpret=True)(x)
    return softplus(y)


hangs_in_pallas.defvjp(lambda x: (hangs_in_pallas(x), x), lambda x, g: (g * jax.nn.sigmoid(x),))

HANG_XLA = dataclasses.replace(TOY, name="toy-hang-xla", kernel=hangs_in_xla)
HANG_PALLAS = dataclasses.replace(TOY, name="toy-hang-pallas", kernel=hangs_in_pallas)
FAMILY = TOY
