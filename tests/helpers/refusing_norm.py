"""A norm implementation with what some libraries lack: layer_norm only, no float16, rows
of at most 4096 multiples of 128 (for the ``--without`` tests of gpu-norm)."""

from __future__ import annotations

import jax.numpy as jnp

from kernel_harness.families.gpu_norm import kernel


def norm(op, x, weight, bias, *, eps, interpret):
    """The Pallas GPU norm, raising on rms_norm, float16 and rows it does not support."""
    if op != "layer_norm":
        raise NotImplementedError(f"{op} is not supported")
    if x.dtype == jnp.float16:
        raise TypeError("float16 is not supported")
    if x.shape[-1] > 4096 or x.shape[-1] % 128:
        raise ValueError(f"rows must be multiples of 128 up to 4096, got {x.shape[-1]}")
    return kernel.norm(op, x, weight, bias, eps=eps, interpret=interpret)
