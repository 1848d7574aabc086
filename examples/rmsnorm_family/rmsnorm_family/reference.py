"""The independent reference: plain jnp RMSNorm at float32, gradients by autodiff
(``jax.vjp`` of the plain formula, not the kernel's hand-written backward)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def _rmsnorm(x: jax.Array, w: jax.Array, eps: float) -> jax.Array:
    return x / jnp.sqrt(jnp.mean(jnp.square(x), axis=-1, keepdims=True) + eps) * w


def reference(case, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``y``, ``dx``, ``dw`` for the case's inputs (upcast to float32)."""
    x, w, dy = (jnp.asarray(inputs[n], jnp.float32) for n in ("x", "w", "dy"))
    y, vjp = jax.vjp(lambda x, w: _rmsnorm(x, w, case.eps), x, w)
    dx, dw = vjp(dy)
    return {"y": np.asarray(y), "dx": np.asarray(dx), "dw": np.asarray(dw)}
