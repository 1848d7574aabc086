"""A bidirectional ring all-gather for TPU in Pallas, with one receive semaphore per ring
step and direction: jax's ``all_gather`` with its schedule dependence removed.

jax's kernel (``jax.experimental.pallas.ops.tpu.all_gather``) shares one receive semaphore
per direction across all steps. Its wait for step i's slot can then be satisfied by the
neighbour's DMA of step i+1, and the slot is forwarded before it arrived: at 3 or more
devices, under the TPU interpreter's out-of-order DMA schedule, rows come back
uninitialized and the race detector flags the forwarding copy
(``kernel-harness check tpu-all-gather``; docs/findings.md). Here step i waits on
semaphore i, which only the neighbour's step-i DMA signals, so a slot is forwarded after
it arrived under every schedule. Signature and result as jax's ``all_gather``
(``--impl kernel_harness.kernels.all_gather_ring:all_gather``).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import jax
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

_P = jax.sharding.PartitionSpec


def _shard_map_unchecked(f: Any, **kwargs: Any) -> Any:
    """``jax.shard_map`` (the experimental one on older jax) without its replication check
    (``check_vma``, ``check_rep`` on older jax): a ``pallas_call`` output carries none."""
    sm = getattr(jax, "shard_map", None)
    if sm is None:
        from jax.experimental.shard_map import shard_map as sm
    params = inspect.signature(sm).parameters
    return sm(f, **kwargs, **{"check_vma" if "check_vma" in params else "check_rep": False})


def _neighbour(my_id: jax.Array, size: int, step: int) -> jax.Array:
    return lax.rem(my_id + step + size, size)


def _ring_kernel(x_ref: Any, o_ref: Any, local_sem: Any, send_sems: Any, recv_sems: Any, *,
                 axis_name: str, axis_names: tuple[str, ...], size: int) -> None:
    my_id = lax.axis_index(axis_name)
    pltpu.async_copy(x_ref, o_ref.at[my_id], local_sem).wait()
    right, left = _neighbour(my_id, size, 1), _neighbour(my_id, size, -1)

    def device(index: jax.Array) -> tuple[jax.Array, ...]:
        # Mesh coordinates: the ring's index on its axis, this device's on the others (a
        # 2-D mesh runs one ring per row of the other axes).
        return tuple(index if name == axis_name else lax.axis_index(name)
                     for name in axis_names)

    barrier = pltpu.get_barrier_semaphore()
    pl.semaphore_signal(barrier, 1, device_id=device(left))
    pl.semaphore_signal(barrier, 1, device_id=device(right))
    pl.semaphore_wait(barrier, 2)
    half = x_ref.shape[0] // 2
    for step in range(size - 1):
        # Slot (my_id - step) travels right (its upper half), slot (my_id + step) left.
        copies = []
        for direction, (to, slot, rows) in enumerate((
                (right, _neighbour(my_id, size, -step), pl.ds(half, half)),
                (left, _neighbour(my_id, size, step), pl.ds(0, half)))):
            copy = pltpu.make_async_remote_copy(
                o_ref.at[slot, rows], o_ref.at[slot, rows], send_sems.at[direction, step],
                recv_sems.at[direction, step], device_id=device(to))
            copy.start()
            copies.append(copy)
        for copy in copies:  # what step + 1 forwards has arrived: its own semaphore said so
            copy.wait()


def all_gather(x: jax.Array, *, mesh: Any, axis_name: str, memory_space: Any = None
               ) -> jax.Array:
    """Every device gets all of ``x`` (sharded by rows over ``axis_name``), as jax's
    ``all_gather`` returns it (declared replicated: each device holds its own copy)."""
    size = mesh.shape[axis_name]
    if size == 1:
        return x
    space = pltpu.VMEM if memory_space is None else memory_space

    def local(shard: jax.Array) -> jax.Array:
        out = pl.pallas_call(
            functools.partial(_ring_kernel, axis_name=axis_name,
                              axis_names=tuple(mesh.axis_names), size=size),
            out_shape=jax.ShapeDtypeStruct((size, *shard.shape), shard.dtype),
            compiler_params=pltpu.CompilerParams(collective_id=0),
            grid_spec=pltpu.PrefetchScalarGridSpec(
                num_scalar_prefetch=0,
                scratch_shapes=(pltpu.SemaphoreType.DMA,
                                pltpu.SemaphoreType.DMA((2, size - 1)),
                                pltpu.SemaphoreType.DMA((2, size - 1))),
                in_specs=[pl.BlockSpec(memory_space=space)],
                out_specs=pl.BlockSpec(memory_space=space)),
        )(shard)
        return out.reshape((size * shard.shape[0], *shard.shape[1:]))

    return jax.jit(_shard_map_unchecked(local, mesh=mesh, in_specs=_P(axis_name),
                                        out_specs=_P(None)))(x)
