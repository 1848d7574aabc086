"""What TPU interpret mode's recorder keeps: plain data, no jax internals.

:func:`kernel_harness.core.compat.recording_tpu_interpret` fills it (and re-exports these
names); :mod:`kernel_harness.run.findings` analyses it."""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class BufferAccess:
    """One read or write of a simulated TPU buffer seen by the race detector.

    ``buffer`` is ``(memory space, buffer id, device, core)``; ``where`` the
    accessed index range (ints/slices, missing trailing dims mean "all");
    ``frame`` the kernel source line (``file:line (function)``) or
    ``pallas_call`` for the interpreter's own block copies; ``kernel`` the
    kernel body function (empty for block copies); ``grid_point`` the
    grid point the accessing core was running; ``race`` whether the
    interpreter's race detector flagged this access.
    """

    kernel_index: int
    kind: str
    buffer: tuple[Any, ...]
    where: tuple[Any, ...]
    device: int
    core: int
    clock: Any
    frame: str
    kernel: str
    grid_point: tuple[int, ...] | None
    race: bool


@dataclasses.dataclass(frozen=True)
class BufferAllocation:
    """A simulated buffer's allocation: its shape, dtype, and whether it started
    uninitialized (NaN-filled) rather than holding data (kernel inputs)."""

    kernel_index: int
    buffer: tuple[Any, ...]
    shape: tuple[int, ...]
    dtype: str
    uninitialized: bool


@dataclasses.dataclass
class TpuInterpretLog:
    """Everything recorded while a :func:`recording_tpu_interpret` context was open.

    ``kernels`` counts interpreted ``pallas_call`` invocations (each gets a fresh
    simulator state, identified by a process-wide serial ``kernel_index``);
    ``races_flagged`` holds the serials whose race detector flagged a race.
    """

    accesses: list[BufferAccess] = dataclasses.field(default_factory=list)
    allocations: dict[tuple[int, tuple[Any, ...]], BufferAllocation] = dataclasses.field(
        default_factory=dict
    )
    grid_points: list[tuple[int, int, tuple[int, ...]]] = dataclasses.field(default_factory=list)
    kernels: int = 0
    races_flagged: set[int] = dataclasses.field(default_factory=set)
