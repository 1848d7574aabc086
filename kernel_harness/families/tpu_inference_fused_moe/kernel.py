"""Adapter running tpu-inference's fused expert-parallel MoE
(``tpu_inference.kernels.fused_moe.v1.kernel.fused_ep_moe``) on a (1, devices) mesh of the
case's first devices, experts sharded over the second axis, with the case's blocks.

The kernel has no ``interpret`` argument: on ``interpret`` and ``tpu-interpret`` it runs
under forced TPU interpret mode with the case's DMA schedule, NaN-filled scratch, reads
of zero rows at a buffer's end allowed (the kernel issues zero-length DMAs there; any read
that reaches data past the end still comes back NaN) and the harness's interpreter
extensions (it reads and writes refs through ``ref.bitcast``/``ref.reshape``). Its result
is sharded by tokens: every device's rows are part of the array compared.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from kernel_harness.core.backends import Backend
from kernel_harness.core.devices import device_mesh
from kernel_harness.families.tpu_inference.modules import KernelModules
from kernel_harness.ops.mesh import AXIS
from kernel_harness.ops.moe.cases import MoeCase
from kernel_harness.records.adapter import Adapter, expect_shape, tpu_kernel_context

NAME = "tpu-inference-fused-moe"
#: The mesh's first axis: the kernel names it "data" itself (``axis_index("data")``).
DATA_AXIS = "data"
IMPL_SIGNATURE = (
    "fused_ep_moe(mesh, tokens, w1, w2, gating_output, top_k, *, renormalize_topk_logits, "
    "act_fn, scoring_fn, b1, b2, bt, bf, bd1, bd2, btc, bfc, bd1c, bd2c, ep_axis_name) -> "
    "out (the package's signature); mesh 2-D with every axis but ep_axis_name of size 1; "
    "tokens [t, h] and gating_output [t, e] sharded by rows, w1 [e, 2, h, f], w2 [e, f, h], "
    "b1 [e, 2, 1, f], b2 [e, 1, h] by experts; out [t, h] sharded by rows"
)
#: The TPU interpreter's settings besides the case's DMA schedule (see the module doc).
INTERPRETER_SETTINGS = {"uninitialized_memory": "nan", "out_of_bounds_reads": "uninitialized"}
_MODULES = KernelModules("fused_moe.v1.kernel")


def fused_ep_moe(mesh: Any, tokens: jax.Array, w1: jax.Array, w2: jax.Array,
                 gating_output: jax.Array, top_k: int, **options: Any) -> jax.Array:
    """The default implementation: tpu-inference's ``fused_ep_moe``."""
    return _MODULES["kernel"].fused_ep_moe(mesh, tokens, w1, w2, gating_output, top_k, **options)


def options(case: MoeCase) -> dict[str, Any]:
    """The call's keyword arguments (but the biases): routing, activation, blocks."""
    return dict(renormalize_topk_logits=case.renormalize, act_fn=case.activation,
                scoring_fn=case.scoring, bt=case.bt, bf=case.bf, bd1=case.bd, bd2=case.bd,
                btc=case.bt_compute, bfc=case.bf_compute, bd1c=case.bd_compute,
                bd2c=case.bd_compute, ep_axis_name=AXIS)


def run(impl: Callable[..., Any], case: MoeCase, inputs: dict[str, np.ndarray],
        backend: Backend) -> dict[str, np.ndarray]:
    """``out`` [tokens, hidden] (float32)."""
    mesh = device_mesh(backend.platform, (1, case.devices), (DATA_AXIS, AXIS), NAME)

    def sharded(name: str) -> jax.Array:
        rank = np.ndim(inputs[name])
        spec = jax.sharding.PartitionSpec(AXIS, *[None] * (rank - 1))
        return jax.device_put(inputs[name], jax.sharding.NamedSharding(mesh, spec))

    biases = {b: sharded(b) for b in ("b1", "b2") if case.bias}
    with tpu_kernel_context(backend, extended=True, dma_execution_mode=case.dma_mode,
                            **INTERPRETER_SETTINGS):
        out = jax.block_until_ready(impl(mesh, sharded("tokens"), sharded("w1"),
                                         sharded("w2"), sharded("gating"), case.top_k,
                                         **biases, **options(case)))
    expect_shape(NAME, out, (case.tokens, case.hidden))
    return {"out": np.asarray(out, np.float32)}


#: How the family calls its kernel.
ADAPTER = Adapter(kernel=fused_ep_moe, impl_signature=IMPL_SIGNATURE, run=run,
                  backends=_MODULES.backends)
