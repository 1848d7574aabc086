"""jax's TPU interpreter reuses a collective kernel traced on one mesh for a mesh with the
same axis sizes in another order: remote DMAs then reach the wrong devices.

A kernel sends each device's block to its right neighbour on mesh axis "x" (device ids in
mesh coordinates, as jax's own all_gather computes them). It runs on a (2, 2) mesh with
axes ("x", "y"), then on a (2, 2) mesh of the same devices with axes ("y", "x"). Each call
alone is right; the second call right after the first is wrong on the two off-diagonal
devices; after ``jax.clear_caches()`` it is right again. Exit 1 while the stale program is
used, 0 when it is not.
"""

import os
import sys

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                           + " --xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402
from jax.experimental.pallas import tpu as pltpu  # noqa: E402

P = jax.sharding.PartitionSpec


def shift_right(x, mesh):
    """Device (.., x=i, ..) receives the block of device x=i-1 of its own row."""
    names = tuple(mesh.axis_names)
    size = mesh.shape["x"]

    def kernel(x_ref, o_ref, send, recv):
        me = lax.axis_index("x")
        right = lax.rem(me + 1, size)
        device = tuple(right if n == "x" else lax.axis_index(n) for n in names)
        copy = pltpu.make_async_remote_copy(x_ref, o_ref, send, recv, device_id=device)
        copy.start()
        copy.wait()

    def local(block):
        return pl.pallas_call(
            kernel, out_shape=jax.ShapeDtypeStruct(block.shape, block.dtype),
            in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec(memory_space=pl.ANY),
            scratch_shapes=[pltpu.SemaphoreType.DMA, pltpu.SemaphoreType.DMA],
            compiler_params=pltpu.CompilerParams(collective_id=0))(block)

    shard_map = getattr(jax, "shard_map", None)
    if shard_map is None:
        from jax.experimental.shard_map import shard_map
        extra = {"check_rep": False}
    else:
        extra = {"check_vma": False}
    return jax.jit(shard_map(local, mesh=mesh, in_specs=P("x"), out_specs=P("x"), **extra))(x)


def wrong_devices(names):
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:4]).reshape(2, 2), names)
    x = np.arange(2 * 8 * 128, dtype=np.float32).reshape(16, 128)
    with pltpu.force_tpu_interpret_mode(pltpu.InterpretParams()):
        out = jax.block_until_ready(
            shift_right(jax.device_put(x, jax.sharding.NamedSharding(mesh, P("x"))), mesh))
    expected = np.roll(x.reshape(2, 8, 128), 1, axis=0).reshape(16, 128)  # x=i gets x=i-1
    bad = []
    for shard in out.addressable_shards:
        if not np.array_equal(np.asarray(shard.data), expected[shard.index]):
            bad.append(shard.device.id)
    return sorted(bad)


print("jax", jax.__version__)
first = wrong_devices(("x", "y"))
second = wrong_devices(("y", "x"))
jax.clear_caches()
cleared = wrong_devices(("y", "x"))
print(f"mesh (x, y) first:                 wrong devices {first}")
print(f"mesh (y, x) right after it:        wrong devices {second}")
print(f"mesh (y, x) after jax.clear_caches: wrong devices {cleared}")
if first or cleared:
    print("UNEXPECTED: a call alone is wrong (the repro, not the cache)")
    sys.exit(2)
if second:
    print("BUG: the second mesh ran the first mesh's program (stale device ids)")
    sys.exit(1)
print("ok: each mesh ran its own program")
