"""Adapter running jax's Pallas TPU all-gather
(``jax.experimental.pallas.ops.tpu.all_gather.all_gather``) on the case's mesh of the first
devices: 1-D, or 2-D with the gather over axis ``x`` (``MeshCase.mesh_layout``).

The kernel has no ``interpret`` argument: on ``interpret`` and ``tpu-interpret`` it runs
under forced TPU interpret mode, with the case's DMA schedule (``dma_mode``), on simulated
CPU devices (``core/devices.py``). Its result is declared replicated (``out_specs=P(None)``,
no check): reading it as one array shows device 0's copy only, so the adapter reads every
device's own buffer and each is compared.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from kernel_harness.core.backends import Backend
from kernel_harness.core.devices import device_mesh
from kernel_harness.ops.all_gather.cases import AllGatherCase
from kernel_harness.ops.mesh import AXIS
from kernel_harness.records.adapter import TPU_BACKENDS, Adapter

IMPL_SIGNATURE = (
    "all_gather(x, *, mesh, axis_name, memory_space) -> gathered (jax's own signature); "
    "x: [devices * shard_rows, cols] sharded by rows over mesh's axis axis_name; "
    "memory_space: pltpu.VMEM or pl.ANY; gathered: [devices * shard_rows, cols] on every "
    "device (each device's own buffer is compared)"
)


def all_gather(x: jax.Array, *, mesh: Any, axis_name: str, memory_space: Any) -> jax.Array:
    """The default implementation: jax's ``all_gather``."""
    from jax.experimental.pallas.ops.tpu import all_gather as ag

    return ag.all_gather(x, mesh=mesh, axis_name=axis_name, memory_space=memory_space)


def memory_space(name: str) -> Any:
    """``vmem`` -> ``pltpu.VMEM``, ``any`` -> ``pl.ANY``."""
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    return {"vmem": pltpu.VMEM, "any": pl.ANY}[name]


def _program(impl: Callable[..., Any], case: AllGatherCase, mesh: Any) -> Callable[..., Any]:
    return functools.partial(impl, mesh=mesh, axis_name=AXIS,
                             memory_space=memory_space(case.memory_space))


def per_device(out: jax.Array, mesh: Any, expected: tuple[int, ...]) -> np.ndarray:
    """Every device's own copy of ``out``, in mesh order: [devices, *expected]."""
    shards = {s.device: s for s in out.addressable_shards}
    missing = [d for d in mesh.devices.flat if d not in shards]
    if missing:
        raise ValueError(f"tpu-all-gather: the result has no buffer on {missing}")
    copies = []
    for d in mesh.devices.flat:
        data = np.asarray(shards[d].data, np.float32)
        if data.shape != expected:
            raise ValueError(f"tpu-all-gather: device {d} holds shape {data.shape}, expected "
                             f"the whole gathered array {expected} on every device")
        copies.append(data)
    return np.stack(copies)


def run(impl: Callable[..., Any], case: AllGatherCase, inputs: dict[str, np.ndarray],
        backend: Backend) -> dict[str, np.ndarray]:
    """``gathered`` [total_devices, devices * shard_rows, cols] (float32): the buffer of
    every device of the mesh, in mesh order."""
    mesh = device_mesh(backend.platform, *case.mesh_layout(), "tpu-all-gather")
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(AXIS))
    x = jax.device_put(inputs["x"], sharding)
    with backend.forcing_interpret(dma_execution_mode=case.dma_mode):
        out = jax.block_until_ready(_program(impl, case, mesh)(x))
    return {"gathered": per_device(out, mesh, inputs["x"].shape)}


#: How the family calls its kernel.
ADAPTER = Adapter(kernel=all_gather, impl_signature=IMPL_SIGNATURE, run=run,
                  backends=TPU_BACKENDS)
