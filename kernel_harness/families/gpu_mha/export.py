"""Standalone repro source for one gpu-mha case (``kernel-harness export-repro``)."""

from __future__ import annotations

from kernel_harness.families.gpu_mha.cases import BLOCK_FIELDS, MhaCase
from kernel_harness.ops.attention.export import call_source
from kernel_harness.ops.attention.record import definition
from kernel_harness.records.export import ExportSnippet


def export(case: MhaCase) -> ExportSnippet:
    """The kernel call with the case's exact options and blocks, and its reference."""
    blocks = ", ".join(f"{n}={getattr(case, n)}" for n in BLOCK_FIELDS)
    segments = "None" if case.q_segments is None else '(x["segment_ids"],) * 2'
    run_kernel = f'''
        from jax.experimental.pallas.ops.gpu.attention import BlockSizes

        OPTIONS = dict(sm_scale={case.effective_scale!r}, causal={case.is_causal},
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
    reference = call_source(
        definition(case), vis=f"visibility({case.q_len}, {case.kv_len}, "
        f"causal={case.is_causal}, segments={segments})",
        arrays={n: f'x["{n}"]' for n in ("q", "k", "v", "do")},
        outputs={n: n for n in ("out", "lse", "dq", "dk", "dv")},
        doc="Softmax attention in float32, HIGHEST (the attention op, its source above); "
        "causal top-left aligned, equal segment ids; lse in log base 2.")
    return ExportSnippet(
        default_import="from jax.experimental.pallas.ops.gpu.attention import mha as kernel",
        run_kernel=run_kernel,
        reference=reference,
        outputs=("out", "lse", "dq", "dk", "dv"),
    )
