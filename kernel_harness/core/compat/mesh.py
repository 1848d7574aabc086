"""What differs between jax versions for simulated meshes: whether jax has started its
backends (after which the CPU device count is fixed), the count the user configured, and
how many devices the TPU interpreter runs a collective kernel on without deadlocking."""

from __future__ import annotations

import jax

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
        from kernel_harness.core.compat import InterpreterLayoutError

        raise InterpreterLayoutError("jax._src.xla_bridge.backends_are_initialized moved")
    return bool(started())


def cpu_device_count_config() -> int:
    """``jax_num_cpu_devices`` as configured (-1 or 0: not set)."""
    return int(getattr(jax.config, "jax_num_cpu_devices", -1) or -1)


def tpu_interpreter_max_devices() -> int | None:
    """The most devices a collective case may use in the TPU interpreter of this jax
    (None: no known limit); see :data:`OLD_INTERPRETER_MAX_DEVICES`."""
    major_minor = tuple(int(p) for p in jax.__version__.split(".")[:2])
    return OLD_INTERPRETER_MAX_DEVICES if major_minor < (0, 11) else None
