"""Standalone repro source for one tpu-inference-all-gather-matmul case
(``kernel-harness export-repro``): the loader that imports tpu-inference's kernel module
without vLLM (embedded verbatim), 8 simulated CPU devices asked for before jax starts, the
case's mesh, blocks and DMA schedule, and the product in float64."""

from __future__ import annotations

import inspect
import textwrap

from kernel_harness.families.tpu_inference.modules import loader_source
from kernel_harness.ops.all_gather_matmul import reference as op
from kernel_harness.ops.all_gather_matmul.cases import AgmmCase
from kernel_harness.records.export import DEVICES_FIRST, ExportSnippet


def export(case: AgmmCase) -> ExportSnippet:
    """The kernel with the case's blocks (TPU interpret mode with NaN-filled memory and the
    case's DMA schedule on the CPU) and the float64 product."""
    default_import = loader_source('''

        _AGMM = kernel_module("collectives.all_gather_matmul")


        def kernel(x, y, mesh, axis_name, *, bn, bk, rhs_transpose):
            """tpu-inference's all_gather_matmul with the given blocks."""
            return _AGMM.all_gather_matmul(x, y, mesh, axis_name, bn=bn, bk=bk,
                                           rhs_transpose=rhs_transpose)
    ''')
    y_spec = '("x", None)' if case.rhs_transpose else '(None, "x")'
    run_kernel = DEVICES_FIRST + textwrap.dedent(f'''

        def run_kernel(x):
            """out [m, n], sharded by columns over the mesh."""
            import contextlib

            from jax.experimental.pallas import tpu as pltpu

            mesh = jax.sharding.Mesh(np.array(jax.devices()[:{case.devices}]), ("x",))
            P = jax.sharding.PartitionSpec
            xs = jax.device_put(x["x"], jax.sharding.NamedSharding(mesh, P("x", None)))
            ys = jax.device_put(x["y"], jax.sharding.NamedSharding(mesh, P{y_spec}))
            context = contextlib.nullcontext()
            if INTERPRET:  # NaN-filled memory, the case's DMA schedule
                context = pltpu.force_tpu_interpret_mode(pltpu.InterpretParams(
                    uninitialized_memory="nan", dma_execution_mode={case.dma_mode!r}))
            with context:
                out = jax.block_until_ready(kernel(xs, ys, mesh, "x", bn={case.bn or None},
                                                   bk={case.bk or None},
                                                   rhs_transpose={case.rhs_transpose}))
            return dict(out=np.asarray(out, np.float32))
    ''')
    reference = inspect.getsource(op.product) + "\n\n" + textwrap.dedent(f'''
        def reference(x):
            """x @ y in float64 (the op's product, embedded above)."""
            return dict(out=product(x["x"], x["y"], {case.rhs_transpose}))
    ''')
    return ExportSnippet(default_import=default_import, run_kernel=run_kernel,
                         reference=reference, outputs=("out",))
