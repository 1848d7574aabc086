"""Standalone repro source for one tpu-all-gather case (``kernel-harness export-repro``):
8 simulated CPU devices asked for before jax starts, the case's mesh and DMA schedule, every
device's copy of the result, and the reference (x on every device)."""

from __future__ import annotations

import inspect
import textwrap

from kernel_harness.ops.all_gather import reference as op
from kernel_harness.ops.all_gather.cases import AllGatherCase
from kernel_harness.records.export import DEVICES_FIRST, ExportSnippet


def export(case: AllGatherCase) -> ExportSnippet:
    """jax's all_gather on the case's mesh (TPU interpret mode with NaN-filled memory and
    the case's DMA schedule on the CPU), each device's buffer read."""
    default_import = textwrap.dedent('''
        def kernel(x, *, mesh, axis_name, memory_space):
            """jax's Pallas TPU all_gather."""
            from jax.experimental.pallas.ops.tpu import all_gather as ag

            return ag.all_gather(x, mesh=mesh, axis_name=axis_name, memory_space=memory_space)
    ''')
    shape, names = case.mesh_layout()
    run_kernel = DEVICES_FIRST + textwrap.dedent(f'''

        def run_kernel(x):
            """Every device's own copy of the gathered array, [mesh devices, rows, cols]."""
            import contextlib

            from jax.experimental import pallas as pl
            from jax.experimental.pallas import tpu as pltpu

            mesh = jax.sharding.Mesh(
                np.array(jax.devices()[:{case.total_devices}]).reshape({shape}), {names})
            spec = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("x"))
            space = {{"vmem": pltpu.VMEM, "any": pl.ANY}}[{case.memory_space!r}]
            context = contextlib.nullcontext()
            if INTERPRET:  # NaN-filled memory, the case's DMA schedule
                context = pltpu.force_tpu_interpret_mode(pltpu.InterpretParams(
                    uninitialized_memory="nan", dma_execution_mode={case.dma_mode!r}))
            with context:
                out = jax.block_until_ready(kernel(jax.device_put(x["x"], spec), mesh=mesh,
                                                   axis_name="x", memory_space=space))
            copies = {{s.device: np.asarray(s.data, np.float32) for s in out.addressable_shards}}
            return dict(gathered=np.stack([copies[d] for d in mesh.devices.flat]))
    ''')
    reference = inspect.getsource(op.gathered) + "\n\n" + textwrap.dedent(f'''
        def reference(x):
            """Every device of the mesh holds all of x (the op's gathered, embedded above)."""
            return dict(gathered=gathered(x["x"], {case.total_devices}))
    ''')
    return ExportSnippet(default_import=default_import, run_kernel=run_kernel,
                         reference=reference, outputs=("gathered",))
