"""What every collective op's case has: the mesh size and the DMA schedule of the TPU
interpreter, their validation, events and strategy pieces (:class:`MeshCase`).

``dma_mode`` is the TPU interpreter's DMA execution mode: ``on_wait`` completes a DMA only
when something waits on it (late, and out of issue order: what a real interconnect may do),
``eager`` completes each as it is issued. On a TPU the hardware schedules, and it is not
used.
"""

from __future__ import annotations

import dataclasses

from hypothesis import strategies as st

from kernel_harness.core.case import Case
from kernel_harness.core.compat.mesh import tpu_interpreter_max_devices

DMA_MODES: tuple[str, ...] = ("on_wait", "eager")
#: The most devices a case uses (the harness's processes simulate this many CPU devices).
MAX_DEVICES = 8


@dataclasses.dataclass(frozen=True, kw_only=True)
class MeshCase(Case):
    """A case on a 1-D mesh.

    Attributes:
      devices: the mesh's size (2 or more; on one device a collective moves nothing).
      dma_mode: the TPU interpreter's DMA schedule, ``on_wait`` or ``eager``.
    """

    devices: int
    dma_mode: str = "on_wait"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.devices < 2:
            raise ValueError(f"devices must be 2 or more, got {self.devices} (on one device "
                             "a collective moves nothing)")
        if self.dma_mode not in DMA_MODES:
            raise ValueError(f"dma_mode must be one of {DMA_MODES}, got {self.dma_mode!r}")


def mesh_events(case: MeshCase) -> list[str]:
    """The mesh size, the schedule, and whether a ring forwards slots it received (3 or
    more devices: where an out-of-order DMA shows)."""
    ev = [f"devices={case.devices}", f"dma:{case.dma_mode}"]
    if case.devices >= 3:
        ev.append("forwarded-slots")
    return ev


def drawn_max_devices() -> int:
    """The most devices a strategy draws on this jax: :data:`MAX_DEVICES`, or fewer where
    its TPU interpreter deadlocks collectives beyond (jax < 0.11, ``core/compat/mesh.py``)."""
    limit = tpu_interpreter_max_devices()
    return MAX_DEVICES if limit is None else min(MAX_DEVICES, limit)


def device_counts(max_devices: int | None = None) -> st.SearchStrategy[int]:
    """2..``max_devices`` devices (None: :func:`drawn_max_devices`), uniformly (a ring of 3
    or more is where forwarding bugs live); shrinks towards 2."""
    return st.sampled_from(range(2, (max_devices or drawn_max_devices()) + 1))


def dma_modes() -> st.SearchStrategy[str]:
    """Either DMA schedule; shrinks towards ``on_wait``."""
    return st.sampled_from(DMA_MODES)
