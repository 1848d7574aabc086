#!/usr/bin/env python3
"""tpu-all-gather: jax's Pallas TPU all_gather forwards slots before they arrive (hand-written).

jax.experimental.pallas.ops.tpu.all_gather on a 1-D mesh of 3 simulated CPU devices, in
the TPU interpreter with NaN-filled memory and its default DMA schedule ("on_wait":
a DMA completes when it is waited on, late and out of issue order). Every device's own
buffer of the (declared replicated) result is compared with x, for 5 calls; then the
same with DMAs completed in issue order ("eager").
Exit 1 while some device's copy is wrong under on_wait; 0 once every copy is right.
Needs only jax and numpy.
"""
import platform
import sys

import jax

jax.config.update("jax_num_cpu_devices", 4)

import numpy as np  # noqa: E402
from jax.experimental.pallas import tpu as pltpu  # noqa: E402
from jax.experimental.pallas.ops.tpu import all_gather as ag  # noqa: E402

print(f"python {platform.python_version()}  jax {jax.__version__}  numpy {np.__version__}")
DEVICES, SHARD_ROWS, COLS = 3, 16, 128
mesh = jax.sharding.Mesh(np.array(jax.devices("cpu")[:DEVICES]), ("x",))
x = np.arange(DEVICES * SHARD_ROWS * COLS, dtype=np.float32).reshape(-1, COLS)
sharded = jax.device_put(x, jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("x")))


def wrong_rows(mode: str) -> list[dict[int, list[int]]]:
    """Per call: {device: rows of its copy that differ from x}."""
    params = pltpu.InterpretParams(uninitialized_memory="nan", dma_execution_mode=mode)
    calls = []
    for _ in range(5):
        with pltpu.force_tpu_interpret_mode(params):
            out = jax.block_until_ready(ag.all_gather(sharded, mesh=mesh, axis_name="x"))
        pltpu.reset_tpu_interpret_mode_state()
        bad = {}
        for shard in out.addressable_shards:
            copy = np.asarray(shard.data)
            rows = np.nonzero(~(copy == x).all(axis=1))[0].tolist()
            if rows:
                bad[shard.device.id] = rows
        calls.append(bad)
    return calls


on_wait, eager = wrong_rows("on_wait"), wrong_rows("eager")
for mode, calls in (("on_wait", on_wait), ("eager", eager)):
    wrong = sum(bool(c) for c in calls)
    print(f"{mode:8s} {wrong}/5 calls with a wrong copy" + "".join(
        f"\n  call {i}: " + ", ".join(f"device {d} rows {r[0]}..{r[-1]} ({len(r)} rows)"
                                      for d, r in sorted(c.items()))
        for i, c in enumerate(calls) if c))
if any(on_wait):
    print("FAIL: under the out-of-order DMA schedule, rows of some device's copy are NaN "
          "(a slot forwarded before it arrived)")
    sys.exit(1)
print("ok: every device's copy is x under both schedules")
sys.exit(0)
