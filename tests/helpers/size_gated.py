"""Implementations wrong only past the sizes the ordinary strategies draw, with the same
program at every size (slices and pads, no branch a trace can see): they pass
``matches-reference`` and ``claimed-sizes`` and fail ``large-sizes``
(``tests/checks/test_large_sizes.py``)."""

from __future__ import annotations

import jax.numpy as jnp

from tests.helpers.generic_cheats import norm, softmax

#: The row length past which the planted softmax drops logits (drawn rows: at most 1025).
SOFTMAX_KEPT = 2048
#: The rows past which the planted norm shifts its rows (drawn: at most 99).
NORM_ROWS = 200


def logits_past_2048_dropped_softmax(x, *, axis=-1, interpret=False):
    """The kernel on the first 2048 logits of each row, probability 0 past them."""
    n = x.shape[-1]
    keep = min(n, SOFTMAX_KEPT)
    out = softmax(x[..., :keep], axis=axis, interpret=interpret)
    return jnp.pad(out, [(0, 0)] * (x.ndim - 1) + [(0, n - keep)])


def rows_shifted_past_200_norm(op, x, weight, bias, *, eps, interpret):
    """The kernels on x padded by one row at the end and read back from row 1: past 200
    rows every row gets its neighbour's result (gradients too)."""
    a, b, n = x.shape
    pad = 1 if a * b > NORM_ROWS else 0
    xp = jnp.pad(x.reshape(a * b, n), ((0, pad), (0, 0))).reshape(1, a * b + pad, n)
    out = norm(op, xp, weight, bias, eps=eps, interpret=interpret)
    return out.reshape(a * b + pad, n)[pad:pad + a * b].reshape(a, b, n)
