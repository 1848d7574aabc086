"""Turning a TPU-interpret access record into findings: data races (with the two
conflicting accesses' cores and grid points) and reads of never-written memory."""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from kernel_harness.core import compat
from kernel_harness.records.waiver_entries import FINDING_KINDS as FINDING_KINDS


@dataclasses.dataclass(frozen=True)
class Finding:
    """One diagnostic finding of one interpreted kernel.

    Attributes:
      kind: ``race`` or ``uninitialized-read``.
      kernel: the kernel body function (``function (file)``).
      kernel_index: which interpreted ``pallas_call`` of the run (0 = first).
      buffer: which buffer, its shape and dtype: ``[input 1] ...``/``[output 0] ...``
        for the kernel's HBM operands in order, ``[vmem#104 core 0] ...`` for a
        core's scratch or block buffers.
      line: the source line of the offending access (``file:line (function)``),
        or ``pallas_call block copy`` for the interpreter's own block copies.
      detail: ranges, cores and grid points involved.
      grid_points: the grid points of the offending accesses.
    """

    kind: str
    kernel: str
    kernel_index: int
    buffer: str
    line: str
    detail: str
    grid_points: tuple[tuple[int, ...], ...]

    def describe(self) -> str:
        return (
            f"{self.kind} in kernel #{self.kernel_index} {self.kernel or '?'}, buffer "
            f"{self.buffer}, at {self.line}: {self.detail}"
        )


def _region(where: Sequence[Any], shape: tuple[int, ...]) -> tuple[slice, ...]:
    out = []
    for dim, size in enumerate(shape):
        r = where[dim] if dim < len(where) else slice(None)
        if isinstance(r, slice):
            start = 0 if r.start is None else int(r.start)
            stop = size if r.stop is None else int(r.stop)
            out.append(slice(start, stop, None if r.step in (None, 1) else int(r.step)))
        else:
            out.append(slice(int(r), int(r) + 1))
    return tuple(out)


def _overlap(a: Sequence[Any], b: Sequence[Any]) -> bool:
    for ra, rb in zip(a, b, strict=False):
        sa = ra if isinstance(ra, slice) else slice(int(ra), int(ra) + 1)
        sb = rb if isinstance(rb, slice) else slice(int(rb), int(rb) + 1)
        if sa.start is None or sb.start is None or sa.stop is None or sb.stop is None:
            continue
        if not (sa.start < sb.stop and sb.start < sa.stop):
            return False
    return True


def _happens_before(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return False
    return bool((a <= b).all() and (a < b).any())


def _fmt_where(where: Sequence[Any]) -> str:
    parts = []
    for r in where:
        if isinstance(r, slice):
            start = "" if r.start is None else r.start
            stop = "" if r.stop is None else r.stop
            parts.append(f"{start}:{stop}")
        else:
            parts.append(str(r))
    return "[" + ", ".join(parts) + "]" if parts else "[all]"


def buffer_names(log: compat.TpuInterpretLog) -> dict[tuple[int, tuple[Any, ...]], str]:
    """Readable names of every allocated buffer: HBM operands numbered per kernel in
    allocation order (``[input i]`` hold data, ``[output j]`` start uninitialized)."""
    names = {}
    counters: collections.Counter = collections.Counter()
    devices = _devices(log)
    for key, alloc in log.allocations.items():
        space, buffer_id, device, core = (tuple(alloc.buffer) + (None,) * 4)[:4]
        if str(space) == "hbm":
            role = "output" if alloc.uninitialized else "input"
            which = (alloc.kernel_index, role, device if len(devices) > 1 else None)
            on = f" on device {device}" if len(devices) > 1 else ""
            label = f"[{role} {counters[which]}{on}]"
            counters[which] += 1
        else:
            on = f"device {device} " if len(devices) > 1 else ""
            label = f"[{space}#{buffer_id} {on}core {core}] scratch or block buffer,"
        names[key] = f"{label} {alloc.shape} {alloc.dtype}"
    return names


def _who(access: compat.BufferAccess, devices: set[Any]) -> str:
    """Who made an access: ``core 1``; on a mesh (``devices``: the devices that own
    buffers) ``device 2 core 0``; a DMA, which the interpreter runs on a virtual device of
    its own, ``a DMA``."""
    if devices and access.device not in devices:
        return f"a DMA (core {access.core})"
    if len(devices) > 1:
        return f"device {access.device} core {access.core}"
    return f"core {access.core}"


def _devices(log: compat.TpuInterpretLog) -> set[Any]:
    return {tuple(a.buffer)[2] for a in log.allocations.values() if len(tuple(a.buffer)) > 2}


def _kernels(log: compat.TpuInterpretLog) -> dict[int, str]:
    counts: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    for a in log.accesses:
        if a.kernel:
            counts[a.kernel_index][a.kernel] += 1
    return {k: c.most_common(1)[0][0] for k, c in counts.items()}


def _line(access: compat.BufferAccess) -> str:
    return "pallas_call block copy" if access.frame == "pallas_call" else access.frame


def _concurrent(a: compat.BufferAccess, b: compat.BufferAccess) -> bool:
    return not (_happens_before(a.clock, b.clock) or _happens_before(b.clock, a.clock))


def find_races(log: compat.TpuInterpretLog, relative: dict[int, int]) -> list[Finding]:
    """Every pair of accesses of one buffer by different cores, at least one a write,
    overlapping and unordered by the simulator's vector clocks (the interpreter's own
    rule; it flags only the first race of a kernel, this lists them all), grouped by
    buffer and the two source lines."""
    by_buffer: dict[tuple[int, tuple[Any, ...]], list[compat.BufferAccess]] = (
        collections.defaultdict(list)
    )
    devices = _devices(log)
    for a in log.accesses:
        if a.clock is not None:
            by_buffer[(a.kernel_index, a.buffer)].append(a)
    names, kernels = buffer_names(log), _kernels(log)
    groups: dict[tuple[Any, ...], list[tuple[Any, Any]]] = collections.defaultdict(list)
    for key, accesses in by_buffer.items():
        if len({(a.device, a.core) for a in accesses}) < 2:
            continue
        for i, a in enumerate(accesses):
            for b in accesses[:i]:
                if ((a.kind == "write" or b.kind == "write") and (a.device, a.core) != (
                        b.device, b.core) and _overlap(a.where, b.where) and _concurrent(a, b)):
                    groups[(key, _line(b), b.kind, _line(a), a.kind)].append((b, a))
    findings = []
    for (key, _, _, _, _), pairs in groups.items():
        b, a = pairs[0]
        points = tuple(dict.fromkeys(p for pair in pairs for x in pair
                                     if (p := x.grid_point) is not None))
        findings.append(
            Finding(
                kind="race", kernel=kernels.get(key[0], ""), kernel_index=relative[key[0]],
                buffer=names.get(key, str(key[1])), line=_line(a),
                detail=(
                    f"{len(pairs)} conflicting pair(s); first: {a.kind} of {_fmt_where(a.where)} "
                    f"by {_who(a, devices)} at grid point {a.grid_point} vs {b.kind} of "
                    f"{_fmt_where(b.where)} by {_who(b, devices)} at grid point {b.grid_point} "
                    f"({_line(b)})"
                ),
                grid_points=points,
            )
        )
    return findings


def find_uninitialized_reads(
    log: compat.TpuInterpretLog, relative: dict[int, int]
) -> list[Finding]:
    """Reads of elements of an uninitialized-at-allocation buffer that nothing wrote first.

    Accesses of one buffer are taken in the order they were recorded, which
    is program order for a core's own VMEM/SMEM buffers and, for HBM outputs,
    the order across the interpreter's barriers.
    """
    written: dict[tuple[int, tuple[Any, ...]], np.ndarray] = {}
    devices = _devices(log)
    hits: dict[tuple[int, tuple[Any, ...], str], list[Any]] = collections.defaultdict(list)
    for a in log.accesses:
        key = (a.kernel_index, a.buffer)
        alloc = log.allocations.get(key)
        if alloc is None or not alloc.uninitialized or not alloc.shape:
            continue
        mask = written.get(key)
        if mask is None:
            mask = written[key] = np.zeros(alloc.shape, bool)
        region = _region(a.where, alloc.shape)
        if a.kind == "write":
            mask[region] = True
            continue
        missing = int(np.count_nonzero(~mask[region]))
        if missing:
            hits[(a.kernel_index, a.buffer, a.frame)].append((a, missing))
    findings = []
    names, kernels = buffer_names(log), _kernels(log)
    for (index, buffer, _frame), found in hits.items():
        first, missing = found[0]
        points = tuple(dict.fromkeys(a.grid_point for a, _ in found if a.grid_point is not None))
        shown = ", ".join(str(p) for p in points[:6]) + (" ..." if len(points) > 6 else "")
        findings.append(
            Finding(
                kind="uninitialized-read", kernel=kernels.get(index, ""),
                kernel_index=relative[index], buffer=names.get((index, buffer), str(buffer)),
                line=_line(first),
                detail=(
                    f"{len(found)} read(s) of never-written elements, first "
                    f"{_fmt_where(first.where)} by {_who(first, devices)} ({missing} elements "
                    f"uninitialized) at grid point(s) {shown or '-'}"
                ),
                grid_points=points,
            )
        )
    return findings
