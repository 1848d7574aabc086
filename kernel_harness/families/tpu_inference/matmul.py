"""What tpu-inference's two quantized matmul kernels share (per output channel,
``quantized_matmul.kernel``; blockwise scales, ``quantized_matmul.blockwise_kernel``),
written once: the call with the case's tiling as its ``tuned_value`` (the package's tuned
table knows TPU chips, not the CPU), the jitted program over x, w_q and w_scale, the
fields of their records and their exported scripts.

Both take the op's cases (:class:`~kernel_harness.ops.quantized_matmul.cases.QmmCase`);
the blockwise one also the case's ``scale_block`` as ``block_size``.
"""

from __future__ import annotations

import textwrap
import types
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp

from kernel_harness.families.tpu_inference.modules import loader_source
from kernel_harness.ops.quantized_matmul.cases import QmmCase, qmm_events
from kernel_harness.ops.quantized_matmul.export import reference_source
from kernel_harness.ops.quantized_matmul.reference import reference_for
from kernel_harness.records.adapter import JittedTpuProgram
from kernel_harness.records.export import ExportSnippet, tpu_interpreting_source


def tiled_call(modules: Mapping[str, types.ModuleType], kernel: str, x: jax.Array,
               w_q: jax.Array, w_scale: jax.Array, *, batch_block: int, out_block: int,
               in_block: int, **options: Any) -> jax.Array:
    """``quantized_matmul_kernel`` of ``modules[kernel]`` tiled as given."""
    tuned = modules["tuned_block_sizes"].TunedValue(batch_block, out_block, in_block)
    return modules[kernel].quantized_matmul_kernel(x, w_q, w_scale, tuned_value=tuned,
                                                   **options)


def _x_q(name: str) -> Any:
    return None if name == "none" else jnp.dtype(name)


def program(family: str, kernel: Callable[..., Any], *, blockwise: bool) -> JittedTpuProgram:
    """``kernel`` as one jitted program of x, w_q and w_scale with the case's tiling and
    quantization of x (and ``block_size`` where ``blockwise``): ``out`` [n_batch, n_out]."""

    def options(fields: dict[str, Any], interpreted: bool) -> dict[str, Any]:
        tiling = dict(x_q_dtype=_x_q(fields["x_q_dtype"]), batch_block=fields["batch_block"],
                      out_block=fields["out_block"], in_block=fields["in_block"])
        return {"block_size": fields["scale_block"], **tiling} if blockwise else tiling

    return JittedTpuProgram(
        family=family, kernel=kernel, operands=lambda case: ("x", "w_q", "w_scale"),
        options=options, outputs=("out",),
        shapes=lambda case, inputs: [(case.n_batch, case.n_out)])


def record_fields(rounding: str) -> dict[str, Any]:
    """The ``Family`` fields both records share: the op's cases and events, its exact
    reference with the kernel's ``rounding`` of x, out's axes."""
    return dict(case_type=QmmCase, reference=reference_for(rounding=rounding),
                output_axes={"out": ("row", "dim")}, events=qmm_events)


def export_snippet(case: QmmCase, kernel: str, *, rounding: str,
                   blockwise: bool) -> ExportSnippet:
    """The script of one case: tpu-inference's ``quantized_matmul.<kernel>`` with the
    case's tiling (under forced TPU interpret mode on interpret) and the op's reference."""
    default_import = loader_source(f'''

        _K = kernel_module("quantized_matmul.{kernel}")
        _T = kernel_module("quantized_matmul.tuned_block_sizes")


        def kernel(x, w_q, w_scale, *, batch_block, out_block, in_block, **options):
            """tpu-inference's {kernel}.quantized_matmul_kernel with the given tiling."""
            return _K.quantized_matmul_kernel(
                x, w_q, w_scale, tuned_value=_T.TunedValue(batch_block, out_block, in_block),
                **options)
    ''')
    options = dict(batch_block=case.batch_block, out_block=case.out_block,
                   in_block=case.in_block)
    if blockwise:
        options["block_size"] = case.scale_block
    x_q = "None" if case.x_q_dtype == "none" else f"jnp.dtype({case.x_q_dtype!r})"
    run_kernel = tpu_interpreting_source(1) + textwrap.dedent(f'''

        OPTIONS = {options!r}


        def run_kernel(x):
            fn = jax.jit(lambda a, w, s: kernel(a, w, s, x_q_dtype={x_q}, **OPTIONS))
            with interpreting():
                out = jax.block_until_ready(fn(x["x"], x["w_q"], x["w_scale"]))
            return dict(out=np.asarray(out, np.float32))
    ''')
    return ExportSnippet(default_import=default_import, run_kernel=run_kernel,
                         reference=reference_source(case, rounding), outputs=("out",))
