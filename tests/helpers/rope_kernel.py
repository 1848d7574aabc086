"""A fused rotary embedding in Pallas, blocked over rows, with a Pallas backward (the
rotation back: the same kernel with -sin): the user's kernel of docs/extending.md, and a
planted block bug (``rope_written_for_32``: the tables' index map assumes 32-row blocks)."""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _rotate(x_ref, cos_ref, sin_ref, o_ref, *, sign):
    x = x_ref[...].astype(jnp.float32)
    h = x.shape[-1] // 2
    c = cos_ref[...].astype(jnp.float32)
    s = sign * sin_ref[...].astype(jnp.float32)
    x1, x2 = x[:, :h], x[:, h:]
    o_ref[...] = jnp.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], -1).astype(o_ref.dtype)


def _call(x, cos, sin, block_rows, interpret, sign, table_block=None):
    rows, width = x.shape
    # table_block: the planted bug, an index map written for one block size.
    tmap = ((lambda i: (i * block_rows // table_block, 0)) if table_block
            else (lambda i: (i, 0)))
    return pl.pallas_call(
        functools.partial(_rotate, sign=sign), grid=(pl.cdiv(rows, block_rows),),
        in_specs=[pl.BlockSpec((block_rows, width), lambda i: (i, 0)),
                  pl.BlockSpec((block_rows, width // 2), tmap),
                  pl.BlockSpec((block_rows, width // 2), tmap)],
        out_specs=pl.BlockSpec((block_rows, width), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=interpret,
    )(x, cos, sin)


def make_rope(table_block=None):
    @functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4))
    def rope(x, cos, sin, block_rows, interpret):
        return _call(x, cos, sin, block_rows, interpret, 1.0, table_block)

    def fwd(x, cos, sin, block_rows, interpret):
        return rope(x, cos, sin, block_rows, interpret), (cos, sin)

    def bwd(block_rows, interpret, res, g):
        cos, sin = res  # rotating back: the same kernel with -sin
        dx = _call(g, cos, sin, block_rows, interpret, -1.0, table_block)
        return dx, jnp.zeros_like(cos), jnp.zeros_like(sin)

    rope.defvjp(fwd, bwd)
    def call(x, cos, sin, *, block_rows, interpret=False):
        if x.shape[-1] % 2 or cos.shape != sin.shape or cos.shape[-1] * 2 != x.shape[-1]:
            raise ValueError(f"rope: x [rows, 2h] needs cos and sin [rows, h], got "
                             f"{x.shape}, {cos.shape}, {sin.shape}")
        return rope(x, cos, sin, block_rows, interpret)

    call.__name__ = call.__qualname__ = "rope"
    return call


rope = make_rope()
rope_written_for_32 = make_rope(table_block=32)


def _last_visited(rows, block_rows, interpret):
    """[8, 128] float32 holding the grid coordinate run last: a row grid declared
    ``parallel`` whose every point writes the same output block (a reduction over a
    dimension declared parallel: its result depends on the order the grid runs in)."""
    def kernel(o_ref):
        o_ref[...] = jnp.full(o_ref.shape, pl.program_id(0), jnp.float32)

    return pl.pallas_call(
        kernel, grid=(pl.cdiv(rows, block_rows),),
        out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)),
        out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
        interpret=interpret)()


def rope_last_block_wins(x, cos, sin, *, block_rows, interpret=False):
    """The planted schedule bug: rope, with its first row nudged by which row block a
    ``parallel`` grid ran last (right on one schedule, different on another)."""
    out = rope(x, cos, sin, block_rows=block_rows, interpret=interpret)
    last = _last_visited(x.shape[0], block_rows, interpret)[0, 0]
    return out.at[0].add((1e-3 * last).astype(out.dtype))
