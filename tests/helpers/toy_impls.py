"""Candidate toy kernels for the gate and golden tests (importable as ``--impl`` targets)."""

from tests.helpers.toy_family import softplus


def slightly_worse(x):
    """Relative error 3e-6: inside the toy tolerance (1e-5), far above the baseline (~1e-8)."""
    return softplus(x) * (1 + 3e-6)


def within_noise(x):
    """Relative error 5e-7: below the gate's floor x factor, so not a regression."""
    return softplus(x) * (1 + 5e-7)


def wrong_when_first_above_1(x):
    """A planted bug that only some data draws expose: wrong (x 1.01) when ``x[0] > 1``."""
    import jax.numpy as jnp

    return jnp.where(x[0] > 1.0, softplus(x) * 1.01, softplus(x))
