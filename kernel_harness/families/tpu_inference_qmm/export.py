"""Standalone repro source for one tpu-inference-quantized-matmul case
(``kernel-harness export-repro``): the loader that imports tpu-inference's kernel module
without vLLM, and the op's reference (:mod:`kernel_harness.ops.quantized_matmul.export`)."""

from __future__ import annotations

import textwrap

from kernel_harness.families.tpu_inference_record import loader_source
from kernel_harness.ops.quantized_matmul.cases import QmmCase
from kernel_harness.ops.quantized_matmul.export import reference_source
from kernel_harness.spec.export import ExportSnippet, tpu_interpreting_source


def export(case: QmmCase) -> ExportSnippet:
    """The kernel with the case's tiling (under forced TPU interpret mode on interpret) and
    the op's reference, int8 activations truncated."""
    default_import = loader_source('''

        _K = kernel_module("quantized_matmul.kernel")
        _T = kernel_module("quantized_matmul.tuned_block_sizes")


        def kernel(x, w_q, w_scale, *, x_q_dtype, batch_block, out_block, in_block):
            """tpu-inference's quantized_matmul_kernel with the given tiling."""
            return _K.quantized_matmul_kernel(x, w_q, w_scale, x_q_dtype=x_q_dtype,
                                              tuned_value=_T.TunedValue(batch_block,
                                                                         out_block, in_block))
    ''')
    x_q = "None" if case.x_q_dtype == "none" else f"jnp.dtype({case.x_q_dtype!r})"
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
    return ExportSnippet(default_import=default_import, run_kernel=run_kernel,
                         reference=reference_source(case, "toward-zero"), outputs=("out",))
