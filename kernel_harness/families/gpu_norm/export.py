"""Standalone repro source for one gpu-norm case (``kernel-harness export-repro``).

The script judges out, dx, dweight and dbias as the harness does: dx, dweight and dbias
against the size of their cancelling terms where larger (``<output>:magnitude``, which the
script's reference returns and the embedded judge reads)."""

from __future__ import annotations

import inspect
import textwrap

from kernel_harness.ops.norm import reference as op
from kernel_harness.ops.norm.cases import NormCase
from kernel_harness.records.export import ExportSnippet

_DEFAULT = '''
from jax.experimental.pallas.ops.gpu import layer_norm as _layer_norm
from jax.experimental.pallas.ops.gpu import rms_norm as _rms_norm


def kernel(op, x, weight, bias, *, eps, interpret):
    """layer_norm.layer_norm or rms_norm.rms_norm with the Triton backward."""
    fn = _layer_norm.layer_norm if op == "layer_norm" else _rms_norm.rms_norm
    return fn(x, weight, bias, eps=eps, backward_pass_impl="triton", interpret=interpret)
'''


def export(case: NormCase) -> ExportSnippet:
    """The kernel's forward and vjp with the case's op and eps, and the norm op's own
    float64 reference (its source embedded, not retyped)."""
    run_kernel = f'''
        @jax.jit
        def _kernel_fwd_bwd(x, weight, bias, do):
            def f(x, w, b):
                return kernel({case.op!r}, x, w, b, eps={case.eps!r}, interpret=INTERPRET)

            out, vjp = jax.vjp(f, x, weight, bias)
            dx, dweight, dbias = vjp(do)
            return dict(out=out, dx=dx, dweight=dweight, dbias=dbias)


        def run_kernel(x):
            return _kernel_fwd_bwd(x["x"], x["weight"], x["bias"], x["do"])
    '''
    reference = inspect.getsource(op.norm) + "\n\n" + textwrap.dedent(f'''
        def reference(x):
            """{case.op} and its vjp: the op's float64 norm (embedded above), as float32."""
            out = norm({case.op!r}, x["x"], x["weight"], x["bias"], x["do"], {case.eps!r})
            return {{k: v.astype(np.float32) for k, v in out.items()}}
    ''')
    return ExportSnippet(default_import=_DEFAULT, run_kernel=run_kernel, reference=reference,
                         outputs=("out", "dx", "dweight", "dbias"))
