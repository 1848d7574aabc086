"""gpu-softmax implementations whose wrappers differ from the family's only past a size,
spelled with layout alone (a ``where`` on an iota, a reshape and a transpose): the same
primitives at every size, for the wrapper comparison with kernels stood in for
(``kernel_harness.checks.wrapper_standin``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from kernel_harness.families.gpu_softmax.kernel import softmax


def tail_masked(x, *, axis=-1, interpret=False):
    """Logits past the 32768th masked: a vocabulary's tail never sampled."""
    col = jax.lax.broadcasted_iota(jnp.int32, x.shape, x.ndim - 1)
    x = jnp.where(col < min(x.shape[-1], 32768), x, -jnp.inf)
    return softmax(x, axis=axis, interpret=interpret)


def rows_interleaved(x, *, axis=-1, interpret=False):
    """Rows interleaved past 512 (a reshape and a transpose, a no-op below)."""
    out = softmax(x, axis=axis, interpret=interpret)
    rows = out.shape[0]
    k = 2 if rows > 512 and rows % 2 == 0 else 1
    return out.reshape(k, rows // k, *out.shape[1:]).swapaxes(0, 1).reshape(out.shape)


def padded(x, *, axis=-1, interpret=False):
    """An honest wrapper that differs at every size (pads a row of zeros, then drops it):
    not compared."""
    out = softmax(jnp.pad(x, [(0, 1)] + [(0, 0)] * (x.ndim - 1)), axis=axis,
                  interpret=interpret)
    return out[:-1]


def same(x, *, axis=-1, interpret=False):
    """The family's kernel under another name: compared, and the same."""
    return softmax(x, axis=axis, interpret=interpret)
