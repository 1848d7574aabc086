"""Standalone repro source for one tpu-inference-fused-moe case (``kernel-harness
export-repro``): the loader that imports tpu-inference's kernel module without vLLM and the
harness's TPU interpreter extensions (both embedded verbatim), 8 simulated CPU devices
asked for before jax starts, the case's mesh, blocks and DMA schedule, and the MoE op's
reference (:mod:`kernel_harness.ops.moe.export`)."""

from __future__ import annotations

import textwrap

from kernel_harness.families.tpu_inference.modules import loader_source
from kernel_harness.families.tpu_inference_fused_moe.kernel import (
    DATA_AXIS,
    INTERPRETER_SETTINGS,
    options,
)
from kernel_harness.ops.mesh import AXIS
from kernel_harness.ops.moe.cases import MoeCase
from kernel_harness.ops.moe.export import reference_source
from kernel_harness.records.export import (
    DEVICES_FIRST,
    ExportSnippet,
    interpreter_source,
)


def export(case: MoeCase) -> ExportSnippet:
    """The kernel with the case's options (TPU interpret mode on the CPU with the
    family's interpreter settings and the case's DMA schedule) and the op's reference."""
    default_import = loader_source('''

        _MOE = kernel_module("fused_moe.v1.kernel")


        def kernel(mesh, tokens, w1, w2, gating_output, top_k, **options):
            """tpu-inference's fused_ep_moe."""
            return _MOE.fused_ep_moe(mesh, tokens, w1, w2, gating_output, top_k, **options)
    ''')
    biases = ("b1", "b2") if case.bias else ()
    settings = {**INTERPRETER_SETTINGS, "dma_execution_mode": case.dma_mode}
    run_kernel = DEVICES_FIRST + "\n\n" + interpreter_source() + textwrap.dedent(f'''


        def run_kernel(x):
            """out [tokens, hidden], sharded by tokens over the mesh."""
            import contextlib

            from jax.experimental.pallas import tpu as pltpu

            mesh = jax.sharding.Mesh(np.array(jax.devices()[:{case.devices}]).reshape(
                1, {case.devices}), ({DATA_AXIS!r}, {AXIS!r}))

            def sharded(name):
                spec = jax.sharding.PartitionSpec({AXIS!r}, *[None] * (x[name].ndim - 1))
                return jax.device_put(x[name], jax.sharding.NamedSharding(mesh, spec))

            context = contextlib.ExitStack()
            if INTERPRET:
                context.enter_context(tpu_interpreter_extensions())
                context.enter_context(pltpu.force_tpu_interpret_mode(
                    pltpu.InterpretParams(**{settings!r})))
            with context:
                out = kernel(mesh, sharded("tokens"), sharded("w1"), sharded("w2"),
                             sharded("gating"), {case.top_k},
                             **{{b: sharded(b) for b in {biases!r}}}, **{options(case)!r})
                out = jax.block_until_ready(out)
            return dict(out=np.asarray(out, np.float32))
    ''')
    return ExportSnippet(default_import=default_import, run_kernel=run_kernel,
                         reference=reference_source(case), outputs=("out",))
