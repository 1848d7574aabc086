"""Candidate toy kernels for the gate and golden tests (importable as ``--impl`` targets)."""

from tests.helpers.toy_family import softplus


def slightly_worse(x):
    """Relative error 3e-6: inside the toy tolerance (1e-5), far above the baseline (~1e-8)."""
    return softplus(x) * (1 + 3e-6)


def within_noise(x):
    """Relative error 5e-7: below the gate's floor x factor, so not a regression."""
    return softplus(x) * (1 + 5e-7)


def off_by_a_thousandth(x):
    """Relative error 1e-3: far outside the toy tolerance (1e-5): must fail."""
    return softplus(x) * (1 + 1e-3)
