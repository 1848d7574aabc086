"""jax's TPU interpreter rejects a zero-length DMA that starts at the end of its source
buffer as an out-of-bounds read, when DMAs complete in issue order.

A kernel copies rows [start, start + size) of an 8-row HBM buffer, with start and size
read at run time (as tpu-inference's fused MoE sends each token to each of its experts: a
size of 0 where the expert is elsewhere). With start = 8 and size = 0 the copy moves
nothing: slicing [8:8] of 8 rows is empty, not out of bounds. Under
``dma_execution_mode="eager"`` the interpreter raises ``IndexError: Out-of-bounds read``;
under the default ``"on_wait"`` the same kernel runs. Exit 1 while the eager run is
rejected, 0 when both run.
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def kernel(s_ref, x_hbm, o_hbm, sem):
    start, size = s_ref[0], s_ref[1]
    copy = pltpu.make_async_copy(x_hbm.at[pl.ds(start, size)], o_hbm.at[pl.ds(0, size)], sem)
    copy.start()
    copy.wait()


def copy_rows(start, size, mode):
    x = jnp.arange(8 * 128, dtype=jnp.float32).reshape(8, 128)
    with pltpu.force_tpu_interpret_mode(pltpu.InterpretParams(dma_execution_mode=mode)):
        call = pl.pallas_call(  # built inside: the interpret mode is read when it is called
            kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
            grid_spec=pltpu.PrefetchScalarGridSpec(
                num_scalar_prefetch=1, in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                out_specs=pl.BlockSpec(memory_space=pl.ANY),
                scratch_shapes=[pltpu.SemaphoreType.DMA]))
        return jax.block_until_ready(call(jnp.array([start, size], jnp.int32), x))


print("jax", jax.__version__)
results = {}
for mode in ("on_wait", "eager"):
    try:
        copy_rows(8, 0, mode)
        results[mode] = "ran"
    except Exception as e:  # noqa: BLE001 - the finding is the exception
        text = str(e)
        results[mode] = ("IndexError: Out-of-bounds read" if "Out-of-bounds read" in text
                         else f"{type(e).__name__}: {text[:200]}")
    print(f"zero-length copy of rows [8:8] of 8, dma_execution_mode={mode!r}: {results[mode]}")
copy_rows(2, 3, "eager")  # a non-empty copy runs in either mode (the kernel is sound)
print("a 3-row copy of rows [2:5] runs under eager")
raise SystemExit(1 if results["eager"] != "ran" else 0)
