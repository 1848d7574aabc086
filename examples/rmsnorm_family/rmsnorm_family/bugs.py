"""Planted bugs the family check must catch (``--impl rmsnorm_family.bugs:NAME``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rmsnorm_family.kernel import rmsnorm


def rmsnorm_forgets_projection(x, w, *, eps=1e-6, block_rows=8, interpret=False):
    """A classic backward bug: dx = rstd * dy * w, dropping the term that comes from
    rstd depending on x. The forward is exact; only dx is wrong."""

    @jax.custom_vjp
    def f(x, w):
        return rmsnorm(x, w, eps=eps, block_rows=block_rows, interpret=interpret)

    def fwd(x, w):
        return f(x, w), (x, w)

    def bwd(res, dy):
        x, w = res
        _, vjp = jax.vjp(
            lambda x, w: rmsnorm(x, w, eps=eps, block_rows=block_rows, interpret=interpret),
            x, w,
        )
        _, dw = vjp(dy)
        xf = x.astype(jnp.float32)
        rstd = jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + eps)
        return (rstd * dy.astype(jnp.float32) * w.astype(jnp.float32)).astype(x.dtype), dw

    f.defvjp(fwd, bwd)
    return f(x, w)


def rmsnorm_eps_outside_sqrt(x, w, *, eps=1e-6, block_rows=8, interpret=False):
    """A forward bug that only shows on small rows: x / (sqrt(mean(x**2)) + eps) computed as
    the kernel's output rescaled; harmless for O(1) rows, wrong for tiny ones."""
    y = rmsnorm(x, w, eps=eps, block_rows=block_rows, interpret=interpret)
    xf = x.astype(jnp.float32)
    ms = jnp.mean(xf * xf, axis=-1, keepdims=True)
    fix = jnp.sqrt(ms + eps) / (jnp.sqrt(ms) + eps)
    return (y.astype(jnp.float32) * fix).astype(y.dtype)
