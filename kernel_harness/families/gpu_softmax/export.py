"""Standalone repro source for one gpu-softmax case (``kernel-harness export-repro``)."""

from __future__ import annotations

from kernel_harness.ops.softmax.cases import SoftmaxCase
from kernel_harness.spec.export import ExportSnippet


def export(case: SoftmaxCase) -> ExportSnippet:
    """The kernel call on x and a float64 softmax over the last axis."""
    run_kernel = f'''
        _kernel = jax.jit(lambda x: kernel(x, axis=-1, interpret=INTERPRET))


        def run_kernel(x):
            return {{"out": np.asarray(_kernel(x["x"])).reshape({case.rows}, {case.n})}}
    '''
    reference = f'''
        def reference(x):
            """softmax over the last axis in float64 (max subtracted), as float32 [rows, n]."""
            z = np.asarray(x["x"], np.float64)
            e = np.exp(z - z.max(axis=-1, keepdims=True))
            p = e / e.sum(axis=-1, keepdims=True)
            return {{"out": p.reshape({case.rows}, {case.n}).astype(np.float32)}}
    '''
    return ExportSnippet(
        default_import="from jax.experimental.pallas.ops.gpu.softmax import softmax as kernel",
        run_kernel=run_kernel, reference=reference, outputs=("out",))
