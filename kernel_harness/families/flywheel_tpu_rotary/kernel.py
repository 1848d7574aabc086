"""Adapter running flywheel-tpu's fused RoPE (``flywheel_tpu.pallas.rotary``): its
``prepare_rotary`` gathers each token's cos/sin from the tables by its packed position and
packs them in the rotation's pairing, and its ``rotate_tile`` rotates a staged head tile
in float32 inside the attention kernels. The library runs it only inside those kernels;
here a Pallas kernel of ours stages one (block_tokens x head_dim) tile of one head per
program (or its (head_dim x block_tokens) transpose, ``head_dim_minor`` False, as the
kernels stage K for some layouts) and calls ``rotate_tile`` on it, as the kernels do.

Forward only: the library's rotary has no backward (its attention raises on a gradient).
TPU interpret mode on both CPU backends (``pltpu.roll``), forced by the harness.
"""

from __future__ import annotations

import functools
import types
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

from kernel_harness.families.flywheel_tpu import library
from kernel_harness.records.adapter import TPU_BACKENDS, JittedTpuProgram

MODULE = "flywheel_tpu.pallas.rotary"

IMPL_SIGNATURE = (
    "rotary(x, cos, sin, *, cu_seqlens, seq_ends, interleaved, head_dim_minor, "
    "block_tokens) -> out; x: [tokens, heads, head_dim] float32/bfloat16; cos, sin: float32 "
    "[table_len, head_dim / 2]; cu_seqlens: int32 numpy [num_seqs + 1] (tokens past the last "
    "are padding); seq_ends: int32 numpy [num_seqs], sequence i's tokens are its positions "
    "seq_ends[i] - len_i .. seq_ends[i] - 1; out like x"
)


# Imported with the family (so ``kernel-harness mutate`` binds a mutated copy) where
# flywheel-tpu can be; None where not.
_LOADED = library.load(MODULE)


def _module() -> types.ModuleType:
    """flywheel-tpu's rotary module; ImportError saying why where it cannot be imported."""
    return library.required(_LOADED, MODULE)


def rotate_kernel(x_ref: Any, c_ref: Any, o_ref: Any, *, interleaved: bool,
                  head_dim_minor: bool) -> None:
    """The Pallas kernel body: one staged tile rotated by flywheel-tpu's ``rotate_tile``."""
    o_ref[...] = _module().rotate_tile(x_ref[...], c_ref[...], interleaved=interleaved,
                                       head_dim_minor=head_dim_minor)


def rotary(x: jax.Array, cos: jax.Array, sin: jax.Array, *, cu_seqlens: np.ndarray,
           seq_ends: np.ndarray, interleaved: bool, head_dim_minor: bool,
           block_tokens: int) -> jax.Array:
    """The default implementation: ``prepare_rotary`` (queries' positions of a paged
    cache: seq_ends as ``seqused_k``, Q only) and ``rotate_tile`` per staged tile."""
    tokens, heads, head_dim = x.shape
    table_len = cos.shape[0]
    # Concrete lengths stay concrete (the library's length check runs while tracing).
    with jax.ensure_compile_time_eval():
        coefficients, _ = _module().prepare_rotary(
            cos, sin, head_dim=head_dim, dtype=x.dtype, seqlen_q=tokens, seqlen_k=table_len,
            interleaved=interleaved, cu_q=jnp.asarray(cu_seqlens, jnp.int32),
            max_seqlen_k=table_len, rotate_k=False,
            seqused_k=jnp.asarray(seq_ends, jnp.int32))
    plane = coefficients[0]  # [tokens, head_dim]
    tiles = x.transpose(1, 0, 2)  # [heads, tokens, head_dim]
    if head_dim_minor:
        x_spec = pl.BlockSpec((None, block_tokens, head_dim), lambda h, t: (h, t, 0))
        c_spec = pl.BlockSpec((block_tokens, head_dim), lambda h, t: (t, 0))
    else:
        tiles, plane = tiles.transpose(0, 2, 1), plane.T
        x_spec = pl.BlockSpec((None, head_dim, block_tokens), lambda h, t: (h, 0, t))
        c_spec = pl.BlockSpec((head_dim, block_tokens), lambda h, t: (0, t))
    out = pl.pallas_call(
        functools.partial(rotate_kernel, interleaved=interleaved,
                          head_dim_minor=head_dim_minor),
        grid=(heads, pl.cdiv(tokens, block_tokens)), in_specs=[x_spec, c_spec],
        out_specs=x_spec, out_shape=jax.ShapeDtypeStruct(tiles.shape, x.dtype),
    )(tiles, plane)
    if not head_dim_minor:
        out = out.transpose(0, 2, 1)
    return out.transpose(1, 0, 2)


def _options(fields: dict[str, Any]) -> dict[str, Any]:
    """The call's keywords from the case's static fields: the packed lengths as concrete
    arrays (prepare_rotary then checks them while tracing; traced, it checks them on the
    device through an ordered host callback, which a CPU cannot lower for a TPU), the
    pairing and the tile."""
    lens, offsets = fields["seq_lens"], fields["offsets"]
    return {"cu_seqlens": np.concatenate([[0], np.cumsum(lens)]).astype(np.int32),
            "seq_ends": (np.asarray(offsets) + np.asarray(lens)).astype(np.int32),
            "interleaved": fields["pairing"] == "interleaved",
            "head_dim_minor": fields["head_dim_minor"], "block_tokens": fields["block_tokens"]}


#: The kernel as one jitted program: ``out``.
PROGRAM = JittedTpuProgram(
    family="flywheel-tpu-rotary", kernel=rotary,
    operands=lambda case: ("x", "cos", "sin"),
    options=lambda fields, interpreted: _options(fields),
    outputs=("out",), shapes=lambda case, inputs: [inputs["x"].shape],
    keywords=("cu_seqlens", "seq_ends", "interleaved", "head_dim_minor", "block_tokens"))
traceable = PROGRAM.traceable

#: How the family calls its kernel.
ADAPTER = PROGRAM.adapter(impl_signature=IMPL_SIGNATURE,
                          backends=library.backends(TPU_BACKENDS))
