"""A copy of the toy kernel in a module of its own: the implementation a catalog's mutants
are planted in (``tests.helpers.toy_impl_mutants``)."""

import jax.numpy as jnp


def softplus_copy(x):
    """softplus, as the toy family's kernel."""
    return jnp.logaddexp(x, 0.0)
