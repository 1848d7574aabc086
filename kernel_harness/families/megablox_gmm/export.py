"""Standalone repro source for one megablox-gmm case (``kernel-harness export-repro``)."""

from __future__ import annotations

import inspect
import textwrap

from kernel_harness.ops.grouped_matmul import reference as op
from kernel_harness.ops.grouped_matmul.cases import GmmCase
from kernel_harness.records.export import ExportSnippet


def export(case: GmmCase) -> ExportSnippet:
    """gmm forward and vjp with the case's static options, and the op's own reference
    (``grouped_matmul``, its source embedded) over the one-hot rows of the groups."""
    offset = 'jnp.reshape(x["group_offset"], ())' if case.group_offset is not None else "None"
    run_kernel = f'''
        @jax.jit
        def _kernel_fwd_bwd(lhs, rhs, group_sizes, group_offset, do):
            def f(lhs, rhs):
                return kernel(lhs, rhs, group_sizes, jnp.{case.out_dtype}, {case.tiling!r},
                              group_offset, None, {case.transpose_rhs}, INTERPRET)

            out, vjp = jax.vjp(f, lhs, rhs)
            dlhs, drhs = vjp(do)
            return dict(out=out, dlhs=dlhs, drhs=drhs)


        def run_kernel(x):
            return _kernel_fwd_bwd(x["lhs"], x["rhs"], x["group_sizes"], {offset}, x["do"])
    '''
    reference = "_HI = HI\n\n\n" + inspect.getsource(op.grouped_matmul) + "\n\n" + \
        textwrap.dedent(f'''
        def reference(x):
            """The op's grouped_matmul (embedded above) over one-hot rows from group_sizes,
            float32 HIGHEST precision; gradients by jax.vjp."""
            sizes = np.asarray(x["group_sizes"], np.int64)
            groups = np.repeat(np.arange(sizes.size), sizes)
            groups = np.concatenate([groups, np.full({case.m} - groups.size, -1)])
            local = groups - {case.offset}
            onehot = jnp.asarray(local[:, None] == np.arange({case.rhs_groups})[None, :],
                                 jnp.float32)
            lhs, rhs, do = (jnp.asarray(x[n], jnp.float32) for n in ("lhs", "rhs", "do"))
            out, vjp = jax.vjp(lambda a, b: grouped_matmul(a, b, onehot, {case.transpose_rhs}),
                               lhs, rhs)
            dlhs, drhs = vjp(do)
            return dict(out=out, dlhs=dlhs, drhs=drhs)
    ''')
    return ExportSnippet(
        default_import="from jax.experimental.pallas.ops.tpu.megablox.ops import gmm as kernel",
        run_kernel=run_kernel, reference=reference, outputs=("out", "dlhs", "drhs"))
