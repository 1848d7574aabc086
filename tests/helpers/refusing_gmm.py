"""A grouped matmul that refuses what tokamax's ragged_dot refuses: group offsets and
sizes below 128 (for the ``--without`` tests of megablox-gmm)."""

from __future__ import annotations

import jax
import numpy as np
from jax.experimental.pallas.ops.tpu.megablox import ops


def _sizes_aligned(group_sizes: np.ndarray) -> None:
    bad = [int(s) for s in np.asarray(group_sizes) if s % 128]
    if bad:
        raise ValueError(f"ragged sizes must be multiples of 128, got {bad}")


def gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, group_offset, existing_out,
        transpose_rhs, interpret):
    """megablox gmm, but raising on a group offset, a dimension or tile below a multiple of
    128 (at trace time) and on unaligned group sizes (at run time, from a callback)."""
    if group_offset is not None:
        raise NotImplementedError("group_offset is not supported")
    dims = (*lhs.shape, *rhs.shape[1:], *tiling)
    if any(d % 128 for d in dims):
        raise ValueError(f"dimensions and tiles must be multiples of 128, got {dims}")
    jax.debug.callback(_sizes_aligned, group_sizes)
    return ops.gmm(lhs, rhs, group_sizes, preferred_element_type, tiling, None, existing_out,
                   transpose_rhs, interpret)
