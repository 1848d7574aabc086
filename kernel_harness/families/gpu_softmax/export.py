"""Standalone repro source for one gpu-softmax case (``kernel-harness export-repro``)."""

from __future__ import annotations

import inspect
import textwrap

from kernel_harness.ops.softmax import reference as op
from kernel_harness.ops.softmax.cases import SoftmaxCase
from kernel_harness.records.export import ExportSnippet


def export(case: SoftmaxCase) -> ExportSnippet:
    """The kernel call on x, and the softmax op's own float64 reference (its source
    embedded, not retyped)."""
    run_kernel = f'''
        _kernel = jax.jit(lambda x: kernel(x, axis=-1, interpret=INTERPRET))


        def run_kernel(x):
            return {{"out": np.asarray(_kernel(x["x"])).reshape({case.rows}, {case.n})}}
    '''
    reference = inspect.getsource(op.softmax) + "\n\n" + textwrap.dedent(f'''
        def reference(x):
            """The op's softmax (embedded above) as float32 [rows, n]."""
            return {{"out": softmax(x["x"]).reshape({case.rows}, {case.n}).astype(np.float32)}}
    ''')
    return ExportSnippet(
        default_import="from jax.experimental.pallas.ops.gpu.softmax import softmax as kernel",
        run_kernel=run_kernel, reference=reference, outputs=("out",))
