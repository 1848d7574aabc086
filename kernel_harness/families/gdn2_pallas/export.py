"""Standalone repro source for one gdn2-pallas case (``kernel-harness export-repro``):
``atomic_ops.gdn2_pallas_forward_trainable`` under ``jax.vjp`` (forced TPU interpret mode
off a TPU, as ``Backend.forcing_interpret`` does: the kernels have no interpret argument),
and the op's token-serial recurrence (its source embedded) with its vjp."""

from __future__ import annotations

import inspect
import textwrap

from kernel_harness.families.gdn2_pallas import kernel as _kernel
from kernel_harness.families.gdn2_pallas.cases import Gdn2Case
from kernel_harness.ops.delta_rule import reference as op
from kernel_harness.ops.delta_rule.reference import document_starts
from kernel_harness.records.export import ExportSnippet, tpu_interpreting_source

_DIFF = ("q", "k", "v", "g", "b", "w")


def export(case: Gdn2Case) -> ExportSnippet:
    """The kernel (the case's bt, bc = bt / 2, mb; wy_eps 0, the family's clip) and the
    reference recurrence, each differentiated with the case's cotangents."""
    names = _DIFF + (("h0",) if case.initial_state else ())
    h0 = "xs[6].astype(jnp.float32)" if case.initial_state else "None"
    run_kernel = tpu_interpreting_source(cores=1) + textwrap.dedent(f'''
        from atomic_ops import KernelConfig

        CONFIG = KernelConfig(bt={case.chunk_size}, bc={case.chunk_size // 2},
                              mb={case.micro_block}, clip={_kernel.CLIP!r}, wy_eps=0.0)


        @jax.jit
        def _kernel_fwd_bwd(x):
            def f(*xs):
                q, k, v, g, b, w = xs[:6]
                return kernel(q, k, v, w, b, g, {1 / case.key_dim ** 0.5!r}, {h0}, CONFIG)

            (out, final), vjp = jax.vjp(f, *(x[n] for n in {names!r}))
            grads = vjp((x["dout"].astype(out.dtype), x["dstate"].astype(final.dtype)))
            return dict(out=out, final_state=final,
                        **{{"d" + n: d for n, d in zip({names!r}, grads)}})


        def run_kernel(x):
            with interpreting():
                return jax.block_until_ready(
                    _kernel_fwd_bwd({{n: jnp.asarray(a) for n, a in x.items()}}))
    ''')
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
                lambda *xs: recurrence(*xs, starts, qk_l2norm=False), *arrays)
            grads = vjp((jnp.asarray(x["dout"], jnp.float32),
                         jnp.asarray(x["dstate"], jnp.float32)))
            return dict(out=out, final_state=final,
                        **{{"d" + n: d for n, d in zip({names!r}, grads)}})
    '''))
    return ExportSnippet(
        default_import="from atomic_ops import gdn2_pallas_forward_trainable as kernel",
        run_kernel=run_kernel, reference=reference,
        outputs=("out", "final_state", *(f"d{n}" for n in names)),
        arrays={"starts": document_starts(case)})
