"""Implementations for the tpu-all-gather tests."""

from __future__ import annotations

import jax
from jax import lax

from kernel_harness.core import compat
from kernel_harness.records.kernels import fallback

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


def waits_for_a_signal_nobody_sends(x, *, mesh, axis_name, memory_space):
    """A planted deadlock: every device waits at the barrier for three signals, and its two
    neighbours send two."""
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    size = mesh.shape[axis_name]

    def kernel(x_ref, o_ref):
        me = lax.axis_index(axis_name)
        barrier = pltpu.get_barrier_semaphore()
        for step in (1, -1):
            to = lax.rem(me + step + size, size)  # a neighbour on the ring's axis, in the
            # mesh's coordinates (a 2-D mesh runs one ring per row of its other axis)
            pl.semaphore_signal(barrier, 1, device_id=tuple(
                to if name == axis_name else lax.axis_index(name) for name in mesh.axis_names))
        pl.semaphore_wait(barrier, 3)
        o_ref[...] = x_ref[...]

    def local(shard):
        return pl.pallas_call(
            kernel, out_shape=jax.ShapeDtypeStruct(shard.shape, shard.dtype),
            compiler_params=pltpu.CompilerParams(collective_id=0))(shard)

    return jax.jit(compat.shard_map_unchecked(local, mesh=mesh, in_specs=_P(axis_name),
                                              out_specs=_P(None)))(x)
