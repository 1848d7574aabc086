"""Standalone repro source for one deltanet-tpu-gdn2 case (``kernel-harness export-repro``):
deltanet-tpu's ``chunk_gdn2`` in fp32 under ``jax.vjp``, and the op's token-serial
recurrence (its source embedded) with its vjp."""

from __future__ import annotations

import inspect
import textwrap

from kernel_harness.ops.delta_rule import reference as op
from kernel_harness.ops.delta_rule.cases import DeltaRuleCase
from kernel_harness.ops.delta_rule.reference import document_starts
from kernel_harness.records.export import ExportSnippet

_DIFF = ("q", "k", "v", "g", "b", "w")


def export(case: DeltaRuleCase, precision: str = "fp32") -> ExportSnippet:
    """The kernel (``precision``, the case's chunk size and normalisation) and the
    reference recurrence, each differentiated with the case's cotangents."""
    names = _DIFF + (("h0",) if case.initial_state else ())
    h0 = "xs[6]" if case.initial_state else "None"
    run_kernel = f'''
        @jax.jit
        def _kernel_fwd_bwd(x):
            def f(*xs):
                return kernel(*xs[:6], segment_ids=x["segment_ids"], initial_state={h0},
                              output_final_state=True, chunk_size={case.chunk_size},
                              precision={precision!r}, qk_l2norm={case.qk_l2norm})

            (out, final), vjp = jax.vjp(f, *(x[n] for n in {names!r}))
            grads = vjp((x["dout"], x["dstate"]))
            return dict(out=out, final_state=final,
                        **{{"d" + n: d for n, d in zip({names!r}, grads)}})


        def run_kernel(x):
            return _kernel_fwd_bwd({{n: jnp.asarray(a) for n, a in x.items()}})
    '''
    h0_ref = ('jnp.asarray(x["h0"], jnp.float32)' if case.initial_state else
              f"jnp.zeros({(case.batch, case.value_heads, case.key_dim, case.value_dim)})")
    reference = (f"import math\n\nL2_EPS = {op.L2_EPS!r}\n\n\n" + inspect.getsource(op.normalised)
                 + "\n\n" + inspect.getsource(op.recurrence) + "\n\n" + textwrap.dedent(f'''
        def reference(x):
            """The token-serial recurrence (embedded above), float32 HIGHEST; gradients by
            jax.vjp."""
            arrays = [jnp.asarray(x[n], jnp.float32) for n in {_DIFF!r}] + [{h0_ref}]
            starts = jnp.asarray(x["starts"])
            (out, final), vjp = jax.vjp(
                lambda *xs: recurrence(*xs, starts, qk_l2norm={case.qk_l2norm}), *arrays)
            grads = vjp((jnp.asarray(x["dout"], jnp.float32),
                         jnp.asarray(x["dstate"], jnp.float32)))
            return dict(out=out, final_state=final,
                        **{{"d" + n: d for n, d in zip({names!r}, grads)}})
    '''))
    return ExportSnippet(
        default_import="from deltanet_tpu import chunk_gdn2 as kernel",
        run_kernel=run_kernel, reference=reference,
        outputs=("out", "final_state", *(f"d{n}" for n in names)),
        arrays={"segment_ids": case.segment_ids(), "starts": document_starts(case)})
