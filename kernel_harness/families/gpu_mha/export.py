"""Standalone repro source for one gpu-mha case (``kernel-harness export-repro``)."""

from __future__ import annotations

from kernel_harness.families.gpu_mha.cases import BLOCK_FIELDS, MhaCase
from kernel_harness.ops.attention.export import reference_source
from kernel_harness.spec.export import ExportSnippet


def export(case: MhaCase) -> ExportSnippet:
    """The kernel call with the case's exact options and blocks, and its reference."""
    blocks = ", ".join(f"{n}={getattr(case, n)}" for n in BLOCK_FIELDS)
    segments = "None" if case.segment_runs is None else '(x["segment_ids"],) * 2'
    run_kernel = f'''
        from jax.experimental.pallas.ops.gpu.attention import BlockSizes

        OPTIONS = dict(sm_scale={case.sm_scale!r}, causal={case.causal},
                       block_sizes=BlockSizes({blocks}),
                       num_warps={case.num_warps}, num_stages={case.num_stages},
                       interpret=INTERPRET)


        @jax.jit
        def _kernel_fwd_bwd(q, k, v, seg, do):
            out, vjp = jax.vjp(lambda q, k, v: kernel(q, k, v, seg, **OPTIONS), q, k, v)
            _, lse = kernel(q, k, v, seg, return_residuals=True, **OPTIONS)
            return dict(zip(("out", "lse", "dq", "dk", "dv"), (out, lse, *vjp(do)), strict=True))


        def run_kernel(x):
            with jax.default_matmul_precision("highest"):
                return _kernel_fwd_bwd(x["q"], x["k"], x["v"], x.get("segment_ids"), x["do"])
    '''
    reference = reference_source(f'''
        def reference(x):
            """Softmax attention in float32, HIGHEST (the attention op's ``attend``, its
            source above); causal top-left aligned, equal segment ids; lse in log base 2."""
            q, k, v, do = (jnp.asarray(x[n], jnp.float32) for n in ("q", "k", "v", "do"))
            vis = visibility({case.q_len}, {case.kv_len}, causal={case.causal},
                             segments={segments})

            def attention(q, k, v):
                out, lse = attend(q, k, v, vis, {case.sm_scale!r}, layout="bqhd")
                return out, lse / np.log(2.0)

            (out, lse), vjp = jax.vjp(attention, q, k, v)
            dq, dk, dv = vjp((do, jnp.zeros_like(lse)))
            return dict(out=out, lse=lse, dq=dq, dk=dk, dv=dv)
    ''')
    return ExportSnippet(
        default_import="from jax.experimental.pallas.ops.gpu.attention import mha as kernel",
        run_kernel=run_kernel,
        reference=reference,
        outputs=("out", "lse", "dq", "dk", "dv"),
    )
