"""Standalone repro source for one tpu-inference-quantized-matmul case
(``kernel-harness export-repro``): the loader that imports tpu-inference's kernel module
without vLLM, and the op's own quantization and exact product, embedded verbatim."""

from __future__ import annotations

import inspect
import textwrap

from kernel_harness.families import tpu_inference_loader
from kernel_harness.ops.quantized_matmul import reference as _reference
from kernel_harness.ops.quantized_matmul.cases import QmmCase
from kernel_harness.spec.export import ExportSnippet, module_source, tpu_interpreting_source


def export(case: QmmCase) -> ExportSnippet:
    """The kernel with the case's tiling (under forced TPU interpret mode on interpret) and
    the truncating int8 reference."""
    default_import = module_source(tpu_inference_loader) + textwrap.dedent('''

        _K = kernel_module("quantized_matmul.kernel")
        _T = kernel_module("quantized_matmul.tuned_block_sizes")


        def kernel(x, w_q, w_scale, *, x_q_dtype, batch_block, out_block, in_block):
            """tpu-inference's quantized_matmul_kernel with the given tiling."""
            return _K.quantized_matmul_kernel(x, w_q, w_scale, x_q_dtype=x_q_dtype,
                                              tuned_value=_T.TunedValue(batch_block,
                                                                         out_block, in_block))
    ''')
    x_q = "jnp.int8" if case.x_q_dtype == "int8" else "None"
    run_kernel = tpu_interpreting_source(1) + textwrap.dedent(f'''

        def run_kernel(x):
            fn = jax.jit(lambda a, w, s: kernel(a, w, s, x_q_dtype={x_q},
                                                batch_block={case.batch_block},
                                                out_block={case.out_block},
                                                in_block={case.in_block}))
            with interpreting():
                out = jax.block_until_ready(fn(x["x"], x["w_q"], x["w_scale"]))
            return dict(out=np.asarray(out, np.float32))
    ''')
    quantize = inspect.getsource(_reference.quantize_rows)
    reference = f'''
ROUNDINGS = {_reference.ROUNDINGS!r}


{quantize}

def reference(x):
    """The exact product, x quantized per row by truncation (the family's contract)."""
    w_q = np.asarray(x["w_q"], np.int64)
    w_scale = np.asarray(x["w_scale"], np.float64)
    if {case.x_q_dtype == "none"}:
        out = np.asarray(x["x"], np.float64) @ w_q.T.astype(np.float64) * w_scale
    else:
        x_q, scale = quantize_rows(x["x"], "toward-zero")
        out = (x_q @ w_q.T).astype(np.float64) * scale[:, None] * w_scale
    return dict(out=out.astype(np.float32))
'''
    return ExportSnippet(default_import=default_import, run_kernel=run_kernel,
                         reference=reference, outputs=("out",))
