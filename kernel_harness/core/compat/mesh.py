"""What differs between jax versions for simulated meshes: whether jax has started its
backends (after which the CPU device count is fixed), the count the user configured, how
many devices the TPU interpreter runs a collective kernel on without deadlocking, and its
stale programs across meshes whose axes are the same but in another order (every jax)."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any

import jax

from kernel_harness.core.compat import JAX_VERSION, InterpreterLayoutError

#: jax < 0.11's TPU interpreter can deadlock a collective on a simulated mesh: every device
#: thread blocks in the interpreter's buffer allocation (``_allocate_buffer`` reading an
#: array inside an ``io_callback``), a hang of the interpreter, not of the kernel. Measured
#: on 2 host cores: 8 devices with shards of 16 KiB or more hang every time, 2-7 devices
#: with shards up to 64 KiB finished; elsewhere 4 devices with 64-row shards hung. jax 0.11
#: and 0.12 run 8 devices with 64 KiB shards.
OLD_INTERPRETER_MAX_DEVICES = 4


def backends_started() -> bool:
    """Whether jax has started its backends (after which the CPU device count is fixed)."""
    from jax._src import xla_bridge

    started = getattr(xla_bridge, "backends_are_initialized", None)
    if started is None:
        raise InterpreterLayoutError("jax._src.xla_bridge.backends_are_initialized moved")
    return bool(started())


def cpu_device_count_config() -> int:
    """``jax_num_cpu_devices`` as configured (-1 or 0: not set)."""
    return int(getattr(jax.config, "jax_num_cpu_devices", -1) or -1)


#: The TPU interpreter reuses a kernel traced on one mesh for a mesh with the same axis
#: sizes in another order (a (2, 2) mesh ("x", "y") then ("y", "x"), or (4, 2) ("x", "y")
#: then (2, 4) ("y", "x")): its device ids are computed in the first mesh's axis order, so
#: remote DMAs reach the wrong devices. Measured on 2x2 meshes, the second call wrong on the
#: two off-diagonal devices every time and right after ``jax.clear_caches()``: jax 0.10.2
#: with jax's own all_gather and with the harness's ring; jax 0.12.0.1 with the ring (jax's
#: kernel right there). No version known to be free of it, so every version gets the
#: workaround.
_LAYOUTS: dict[frozenset[tuple[str, int]], tuple[str, ...]] = {}


def before_mesh_call(mesh: Any) -> None:
    """Call before running a kernel on ``mesh``: clears jax's caches when this process
    last ran a mesh with the same axis sizes in another order (the TPU interpreter's stale
    program, see above: the interpreter's bug, not the kernel's)."""
    names = tuple(mesh.axis_names)
    sizes = frozenset((name, int(mesh.shape[name])) for name in names)
    if _LAYOUTS.get(sizes, names) != names:
        jax.clear_caches()
    _LAYOUTS[sizes] = names


def tpu_interpreter_max_devices() -> int | None:
    """The most devices a collective case may use in the TPU interpreter of this jax
    (None: no known limit); see :data:`OLD_INTERPRETER_MAX_DEVICES`."""
    return OLD_INTERPRETER_MAX_DEVICES if JAX_VERSION[:2] < (0, 11) else None


#: Interpreter functions a simulated device blocks in, and what the wait is.
INTERPRETER_WAITS = {
    "semaphore_wait": "waits on a semaphore",
    "dma_wait": "waits for a DMA",
    "_allocate_buffer": "waits in the interpreter's buffer allocation",
    "allocate_buffer": "waits in the interpreter's buffer allocation",
}
_INTERPRETER = "pallas/mosaic/interpret"


def interpreter_waits() -> list[dict[str, Any]]:
    """Each thread blocked in the TPU interpreter: its device, core and what it waits on."""
    found = []
    for frame in sys._current_frames().values():
        while frame is not None:
            code = frame.f_code
            path = code.co_filename.replace("\\", "/")
            if code.co_name in INTERPRETER_WAITS and _INTERPRETER in path:
                local = frame.f_locals
                found.append({
                    "device": _plain(local.get("device_id")),
                    "core": _plain(local.get("local_core_id")),
                    "semaphore": _plain(local.get("sem_id")), "value": _plain(local.get("value")),
                    "wait": code.co_name, "kernel_line": _kernel_line(local.get("source_info")),
                    "where": f"{Path(code.co_filename).name}:{frame.f_lineno}"})
                break
            frame = frame.f_back
    return found


def _plain(value: Any) -> int | None:
    """An int local as it is; anything else (a jax array, which the hung interpreter may be
    reading: converting it would block here too) as None."""
    return value if isinstance(value, int) else None


def _kernel_line(source_info: Any) -> str | None:
    """The kernel's source line the interpreter is running (``file:line (function)``)."""
    if source_info is None:
        return None
    try:
        from jax._src import source_info_util

        return source_info_util.summarize(source_info)
    except Exception:  # noqa: BLE001 - a report detail, never a reason to fail the report
        return None


def drain_failed_effects() -> None:
    """Waits for jax's pending effects and forgets their runtime tokens. A kernel that
    failed inside an effectful callback on a mesh (the TPU interpreter's) leaves its error
    in the token of each device's ordered effects; jax 0.10's barrier raises it without
    clearing them, and every later effectful computation on those devices then fails with
    that old error (measured: every example after a crashed 2-device collective)."""
    from jax._src import dispatch

    with contextlib.suppress(Exception):
        jax.effects_barrier()
    tokens = getattr(dispatch, "runtime_tokens", None)
    if tokens is None or not callable(getattr(tokens, "clear", None)):
        raise InterpreterLayoutError("jax._src.dispatch.runtime_tokens.clear() moved")
    tokens.clear()
