"""Implementations for the tpu-all-gather tests."""

from __future__ import annotations

import jax
from jax import lax

from kernel_harness.core import compat
from kernel_harness.spec.kernels import fallback

_P = jax.sharding.PartitionSpec


@fallback("a test impl: XLA's all-gather, right on device 0 only")
def right_on_device_0_only(x, *, mesh, axis_name, memory_space):
    """Device 0 gets the whole array; every other device zeros: a device-0 view (what
    ``np.asarray`` of a replicated result reads) passes it."""
    def local(shard):
        full = lax.all_gather(shard, axis_name, tiled=True)
        return full * (lax.axis_index(axis_name) == 0).astype(full.dtype)

    return jax.jit(compat.shard_map_unchecked(local, mesh=mesh, in_specs=_P(axis_name),
                                              out_specs=_P(None)))(x)
