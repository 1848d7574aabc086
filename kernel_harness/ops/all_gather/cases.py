"""Cases of the all-gather op and the strategy.

``x [devices * shard_rows, cols]`` is split by rows over the mesh axis of ``devices``
devices (on a 2-D mesh, replicated across the other axis: each of its positions gathers on
its own); after the collective every device of the mesh holds all of ``x``. A case also
names where the kernel's buffers live (``vmem`` or ``any``: HBM) and the schedule the TPU
interpreter runs its DMAs in (``dma_mode``): ``on_wait`` completes a DMA only when
something waits on it (late, and out of issue order: what a real interconnect may do),
``eager`` completes each as it is issued. On a TPU the hardware schedules, and
``dma_mode`` is not used.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np
from hypothesis import strategies as st

from kernel_harness.core.case import check_sizes, standard_normal
from kernel_harness.ops.mesh import (
    MeshCase,
    device_counts,
    dma_modes,
    mesh_events,
    other_axes,
)

MEMORY_SPACES: tuple[str, ...] = ("vmem", "any")
#: Rows of a TPU tile per dtype: a half shard (what the ring sends each way) is whole tiles.
TILE_ROWS = {"float32": 8, "bfloat16": 16}


@dataclasses.dataclass(frozen=True, kw_only=True)
class AllGatherCase(MeshCase):
    """One all-gather on ``devices`` devices (:class:`~kernel_harness.ops.mesh.MeshCase`).

    Attributes:
      shard_rows: rows of each device's shard (even: the ring sends half each way).
      cols: columns.
      memory_space: ``vmem`` or ``any`` (the kernel's input and output blocks).
    """

    shard_rows: int
    cols: int
    memory_space: str = "vmem"

    TWO_D: ClassVar[bool] = True

    def __post_init__(self) -> None:
        super().__post_init__()
        check_sizes(self, "shard_rows", "cols")
        if self.shard_rows % 2:
            raise ValueError(f"shard_rows must be even, got {self.shard_rows}: the ring sends "
                             "half of each shard each way")
        if self.memory_space not in MEMORY_SPACES:
            raise ValueError(f"memory_space must be one of {MEMORY_SPACES}, got "
                             f"{self.memory_space!r}")

    def shape_summary(self) -> str:
        """``devices=3 shard=(16,128) vmem dma=on_wait`` (``mesh=(2,3)`` after the devices on
        a 2-D mesh: its shape, the gathered axis ``x`` as in the mesh)."""
        shape, names = self.mesh_layout()
        mesh = f" mesh={shape}:{','.join(names)}" if len(shape) > 1 else ""
        return (f"devices={self.devices}{mesh} shard=({self.shard_rows},{self.cols}) "
                f"{self.memory_space} dma={self.dma_mode}")

    def materialize(self) -> dict[str, np.ndarray]:
        """x [devices * shard_rows, cols]: standard normal, every element distinct, so a
        row landing in the wrong place is seen."""
        return {"x": standard_normal(self.rng(), (self.devices * self.shard_rows, self.cols),
                                     self.dtype)}


def all_gather_events(case: AllGatherCase) -> list[str]:
    """What the case reaches: the mesh size (a ring of 3 or more forwards slots it received,
    where an out-of-order DMA shows), the schedule and the memory space."""
    ev = [case.dtype, *mesh_events(case), f"memory:{case.memory_space}"]
    if case.devices % 2:
        ev.append("odd-devices")
    if case.devices & (case.devices - 1):
        ev.append("devices-not-power-of-2")
    return ev


@st.composite
def all_gather_cases(draw: st.DrawFn, *, max_devices: int | None = None,
                     dtypes: tuple[str, ...] = ("float32", "bfloat16")) -> AllGatherCase:
    """Valid :class:`AllGatherCase` s that lower for TPU: 2..``max_devices`` devices
    (:func:`~kernel_harness.ops.mesh.device_counts`), half the time on a 2-D mesh
    (:func:`~kernel_harness.ops.mesh.other_axes`), shards of one or two TPU tiles per
    half, 128 or 256 columns, either memory space and either DMA schedule. Shrinks towards
    2 devices on a 1-D mesh, float32, one tile, VMEM, on_wait."""
    dtype = draw(st.sampled_from(dtypes))
    case = AllGatherCase(
        dtype=dtype, seed=draw(st.integers(0, 2**31 - 1)),
        devices=draw(device_counts(max_devices)),
        shard_rows=2 * TILE_ROWS[dtype] * draw(st.integers(1, 2)),
        cols=draw(st.sampled_from((128, 256))),
        memory_space=draw(st.sampled_from(MEMORY_SPACES)),
        dma_mode=draw(dma_modes()))
    return dataclasses.replace(case, **draw(other_axes(case.devices, max_devices)))
