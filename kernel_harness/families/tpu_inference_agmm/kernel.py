"""Adapter running tpu-inference's all-gather matmul
(``tpu_inference.kernels.collectives.all_gather_matmul.all_gather_matmul``) on a 1-D mesh
of the case's first ``devices`` devices, with the case's blocks.

The kernel has no ``interpret`` argument: on ``interpret`` and ``tpu-interpret`` it runs
under forced TPU interpret mode with the case's DMA schedule, on simulated CPU devices
(``core/devices.py``). Its result is sharded by columns (``out_specs=P(None, axis)``):
every device's block is part of the array compared. The package's ``make_optimized_mesh``
(a TPU-only device sort) is not used: the mesh is the devices in order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from kernel_harness.core.backends import Backend
from kernel_harness.core.devices import device_mesh
from kernel_harness.families.tpu_inference.modules import KernelModules
from kernel_harness.ops.all_gather_matmul.cases import AgmmCase
from kernel_harness.records.adapter import Adapter, expect_shape

AXIS = "x"
IMPL_SIGNATURE = (
    "all_gather_matmul(x, y, mesh, axis_name, *, bn, bk, rhs_transpose) -> out (the "
    "package's signature); x: [m, k] sharded by rows over axis_name, y: [k, n] (or [n, k] "
    "with rhs_transpose); bn/bk: blocks, None for the kernel's default; out: [m, n] sharded "
    "by columns"
)

_MODULES = KernelModules("collectives.all_gather_matmul")


def all_gather_matmul(x: jax.Array, y: jax.Array, mesh: Any, axis_name: str, *,
                      bn: int | None, bk: int | None, rhs_transpose: bool) -> jax.Array:
    """The default implementation: tpu-inference's ``all_gather_matmul``."""
    return _MODULES["all_gather_matmul"].all_gather_matmul(x, y, mesh, axis_name, bn=bn,
                                                           bk=bk, rhs_transpose=rhs_transpose)


def run(impl: Callable[..., Any], case: AgmmCase, inputs: dict[str, np.ndarray],
        backend: Backend) -> dict[str, np.ndarray]:
    """``out`` [m, n] (float32)."""
    mesh = device_mesh(backend.platform, (case.devices,), (AXIS,),
                       "tpu-inference-all-gather-matmul")
    spec = jax.sharding.PartitionSpec
    x = jax.device_put(inputs["x"], jax.sharding.NamedSharding(mesh, spec(AXIS, None)))
    y_spec = spec(AXIS, None) if case.rhs_transpose else spec(None, AXIS)
    y = jax.device_put(inputs["y"], jax.sharding.NamedSharding(mesh, y_spec))
    with backend.forcing_interpret(dma_execution_mode=case.dma_mode):
        out = jax.block_until_ready(impl(x, y, mesh, AXIS, bn=case.bn or None,
                                         bk=case.bk or None,
                                         rhs_transpose=case.rhs_transpose))
    expect_shape("tpu-inference-all-gather-matmul", out, (case.m, case.n))
    return {"out": np.asarray(out, np.float32)}


#: How the family calls its kernel.
ADAPTER = Adapter(kernel=all_gather_matmul, impl_signature=IMPL_SIGNATURE, run=run,
                  backends=_MODULES.backends)
