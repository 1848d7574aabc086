"""tpu-all-gather's invalid configurations (``kernel-harness bad-input tpu-all-gather``;
see :mod:`kernel_harness.records.bad_input`)."""

from __future__ import annotations

from typing import Any

from kernel_harness.records.bad_input import BadInput


def _gather(devices: int, shard_rows: int, cols: int = 128) -> Any:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental.pallas import tpu as pltpu
    from jax.experimental.pallas.ops.tpu import all_gather as ag

    from kernel_harness.core.devices import device_mesh

    mesh = device_mesh("cpu", (devices,), ("x",), "tpu-all-gather")
    x = jnp.arange(devices * shard_rows * cols, dtype=jnp.float32).reshape(-1, cols)
    params = pltpu.InterpretParams(detect_races=False, uninitialized_memory="zero",
                                   dma_execution_mode="eager")
    with pltpu.force_tpu_interpret_mode(params):
        out = jax.block_until_ready(ag.all_gather(x, mesh=mesh, axis_name="x"))
    if not np.array_equal(np.asarray(out), np.asarray(x)):
        rows = np.nonzero((np.asarray(out) != np.asarray(x)).any(axis=1))[0]
        return f"rows {rows.tolist()} of the gathered array differ from x"
    return out


def bad_inputs() -> list[BadInput]:
    """Its invalid configurations, each with the message a clear error matches."""
    return [
        BadInput("odd rows per shard", lambda: _gather(2, 9),
                 r"(?i)shard.*(even|divisible|odd)", status="silent",
                 finding="returns a result without a word: the ring sends shard_rows // 2 "
                 "rows each way, so the last row of every shard is never sent (device 0 "
                 "then holds whatever its output buffer held there)"),
        BadInput("axis_name names two axes", lambda: _two_axes(),
                 r"Only one axis supported"),
    ]


def _two_axes() -> Any:
    import jax.numpy as jnp
    from jax.experimental.pallas.ops.tpu import all_gather as ag

    from kernel_harness.core.devices import device_mesh

    mesh = device_mesh("cpu", (2, 2), ("x", "y"), "tpu-all-gather")
    return ag.all_gather(jnp.ones((8, 128), jnp.float32), mesh=mesh, axis_name=("x", "y"))
