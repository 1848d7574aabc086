"""A fused RMSNorm in Pallas: ``y = x * rsqrt(mean(x**2, -1) + eps) * w``.

x ``[rows, hidden]``, w ``[hidden]``. The forward kernel normalizes a block of
rows per grid step and also writes each row's ``rstd``; the backward kernel
(wired with ``jax.custom_vjp``) computes ``dx`` per row block and a per-block
partial ``dw`` that is summed afterwards. Accumulation is float32.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _fwd_kernel(x_ref, w_ref, y_ref, rstd_ref, *, eps):
    x = x_ref[...].astype(jnp.float32)
    rstd = jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps)
    y_ref[...] = (x * rstd * w_ref[...].astype(jnp.float32)).astype(y_ref.dtype)
    rstd_ref[...] = rstd


def _bwd_kernel(x_ref, w_ref, rstd_ref, dy_ref, dx_ref, dw_ref):
    x = x_ref[...].astype(jnp.float32)
    w = w_ref[...].astype(jnp.float32)
    rstd = rstd_ref[...]
    dy = dy_ref[...].astype(jnp.float32)
    g = dy * w
    # d/dx of x * rstd: rstd * g minus the projection through rstd's dependence on x.
    proj = jnp.mean(g * x, axis=-1, keepdims=True) * rstd * rstd * rstd
    dx_ref[...] = (rstd * g - x * proj).astype(dx_ref.dtype)
    dw_ref[...] = jnp.sum(dy * x * rstd, axis=0, keepdims=True)


def _check(x: jax.Array, w: jax.Array, block_rows: int) -> None:
    rows, hidden = x.shape
    if w.shape != (hidden,):
        raise ValueError(f"w must have shape ({hidden},), got {w.shape}")
    if block_rows < 1 or rows % block_rows:
        raise ValueError(f"block_rows={block_rows} must divide rows={rows}")


def _forward(x, w, eps, block_rows, interpret):
    rows, hidden = x.shape
    row_block = pl.BlockSpec((block_rows, hidden), lambda i: (i, 0))
    return pl.pallas_call(
        functools.partial(_fwd_kernel, eps=eps),
        grid=(rows // block_rows,),
        in_specs=[row_block, pl.BlockSpec((1, hidden), lambda i: (0, 0))],
        out_specs=[row_block, pl.BlockSpec((block_rows, 1), lambda i: (i, 0))],
        out_shape=[jax.ShapeDtypeStruct(x.shape, x.dtype),
                   jax.ShapeDtypeStruct((rows, 1), jnp.float32)],
        interpret=interpret,
    )(x, w.reshape(1, hidden))


def _backward(x, w, rstd, dy, block_rows, interpret):
    rows, hidden = x.shape
    n_blocks = rows // block_rows
    row_block = pl.BlockSpec((block_rows, hidden), lambda i: (i, 0))
    dx, dw_parts = pl.pallas_call(
        _bwd_kernel,
        grid=(n_blocks,),
        in_specs=[row_block, pl.BlockSpec((1, hidden), lambda i: (0, 0)),
                  pl.BlockSpec((block_rows, 1), lambda i: (i, 0)), row_block],
        out_specs=[row_block, pl.BlockSpec((1, hidden), lambda i: (i, 0))],
        out_shape=[jax.ShapeDtypeStruct(x.shape, x.dtype),
                   jax.ShapeDtypeStruct((n_blocks, hidden), jnp.float32)],
        interpret=interpret,
    )(x, w.reshape(1, hidden), rstd, dy)
    return dx, jnp.sum(dw_parts, axis=0).astype(w.dtype)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3, 4))
def _rmsnorm(x, w, eps, block_rows, interpret):
    return _forward(x, w, eps, block_rows, interpret)[0]


def _rmsnorm_fwd(x, w, eps, block_rows, interpret):
    y, rstd = _forward(x, w, eps, block_rows, interpret)
    return y, (x, w, rstd)


def _rmsnorm_bwd(eps, block_rows, interpret, residuals, dy):
    x, w, rstd = residuals
    return _backward(x, w, rstd, dy, block_rows, interpret)


_rmsnorm.defvjp(_rmsnorm_fwd, _rmsnorm_bwd)


def rmsnorm(
    x: jax.Array, w: jax.Array, *, eps: float = 1e-6, block_rows: int = 8,
    interpret: bool = False,
) -> jax.Array:
    """Fused RMSNorm of ``x [rows, hidden]`` with weight ``w [hidden]``; differentiable
    (custom VJP) in ``x`` and ``w``. ``block_rows`` must divide ``rows``."""
    _check(x, w, block_rows)
    return _rmsnorm(x, w, float(eps), int(block_rows), interpret)
