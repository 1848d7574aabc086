"""What every collective op's case has: the mesh (the collective's axis and, where the op
runs on a 2-D mesh, a second axis) and the DMA schedule of the TPU interpreter, their
validation, events and strategy pieces (:class:`MeshCase`).

``dma_mode`` is the TPU interpreter's DMA execution mode: ``on_wait`` completes a DMA only
when something waits on it (late, and out of issue order: what a real interconnect may do),
``eager`` completes each as it is issued. On a TPU the hardware schedules, and it is not
used.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from hypothesis import strategies as st

from kernel_harness.core.case import Case
from kernel_harness.core.compat.mesh import tpu_interpreter_max_devices

DMA_MODES: tuple[str, ...] = ("on_wait", "eager")
#: The mesh axis the collective runs over, and the second axis of a 2-D mesh.
AXIS, OTHER_AXIS = "x", "y"
#: The most devices a case uses (the harness's processes simulate this many CPU devices).
MAX_DEVICES = 8


@dataclasses.dataclass(frozen=True, kw_only=True)
class MeshCase(Case):
    """A case on a 1-D mesh, or a 2-D one where the op runs on it (:attr:`TWO_D`).

    Attributes:
      devices: the size of the collective's axis (2 or more; on one device a collective
        moves nothing).
      dma_mode: the TPU interpreter's DMA schedule, ``on_wait`` or ``eager``.
      other_axis: the size of a second mesh axis (1: a 1-D mesh); each of its positions
        runs its own collective over ``devices`` devices, the data replicated across it.
      other_axis_first: the mesh is (other_axis, devices), axes ("y", "x"); else
        (devices, other_axis), axes ("x", "y"): the collective's devices are then not
        neighbours in device order.
    """

    devices: int
    dma_mode: str = "on_wait"
    other_axis: int = 1
    other_axis_first: bool = True

    #: Whether the op runs on a 2-D mesh (a case type that does not refuses other_axis > 1).
    TWO_D: ClassVar[bool] = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.devices < 2:
            raise ValueError(f"devices must be 2 or more, got {self.devices} (on one device "
                             "a collective moves nothing)")
        if self.dma_mode not in DMA_MODES:
            raise ValueError(f"dma_mode must be one of {DMA_MODES}, got {self.dma_mode!r}")
        if self.other_axis < 1:
            raise ValueError(f"other_axis must be 1 (a 1-D mesh) or more, got "
                             f"{self.other_axis}")
        if self.other_axis > 1 and not self.TWO_D:
            raise ValueError(f"{type(self).__name__} runs on a 1-D mesh only: other_axis "
                             f"must be 1, got {self.other_axis}")
        if self.total_devices > MAX_DEVICES:
            raise ValueError(f"devices x other_axis = {self.total_devices} is more than the "
                             f"{MAX_DEVICES} devices the harness simulates")

    @property
    def total_devices(self) -> int:
        """Every device of the mesh."""
        return self.devices * self.other_axis

    def mesh_layout(self) -> tuple[tuple[int, ...], tuple[str, ...]]:
        """The mesh's shape and axis names: ``((devices,), ("x",))`` or, on a 2-D mesh,
        ``((other_axis, devices), ("y", "x"))`` / ``((devices, other_axis), ("x", "y"))``."""
        if self.other_axis == 1:
            return (self.devices,), (AXIS,)
        if self.other_axis_first:
            return (self.other_axis, self.devices), (OTHER_AXIS, AXIS)
        return (self.devices, self.other_axis), (AXIS, OTHER_AXIS)


def mesh_events(case: MeshCase) -> list[str]:
    """The mesh size, the schedule, whether a ring forwards slots it received (3 or more
    devices: where an out-of-order DMA shows), and a 2-D mesh's layout."""
    ev = [f"devices={case.devices}", f"dma:{case.dma_mode}"]
    if case.devices >= 3:
        ev.append("forwarded-slots")
    if case.other_axis > 1:
        ev += ["mesh:2d", "mesh:other-axis-" + ("first" if case.other_axis_first else "last")]
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


@st.composite
def other_axes(draw: st.DrawFn, devices: int, max_devices: int | None = None
               ) -> dict[str, object]:
    """A second mesh axis for a collective over ``devices`` devices: none (half the time),
    else 2-4 positions where the mesh still fits ``max_devices`` (None:
    :func:`drawn_max_devices`), before or after the collective's axis. The
    :class:`MeshCase` fields; shrinks towards a 1-D mesh."""
    limit = max_devices or drawn_max_devices()
    sizes = [o for o in (2, 3, 4) if devices * o <= limit]
    if not sizes or not draw(st.booleans()):
        return {}
    return dict(other_axis=draw(st.sampled_from(sizes)), other_axis_first=draw(st.booleans()))
