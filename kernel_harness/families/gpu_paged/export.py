"""Standalone repro source for one gpu-paged case (``kernel-harness export-repro``)."""

from __future__ import annotations

from kernel_harness.families.gpu_paged.cases import PagedCase
from kernel_harness.ops.paged_attention.export import reference_source
from kernel_harness.records.export import ExportSnippet


def export(case: PagedCase) -> ExportSnippet:
    """The kernel call with the case's exact options, and the paged-decode reference."""
    run_kernel = f'''
        OPTIONS = dict(block_h={case.block_h},
                       pages_per_compute_block={case.pages_per_compute_block},
                       k_splits={case.k_splits}, num_warps={case.num_warps},
                       num_stages={case.num_stages}, interpret=INTERPRET,
                       attn_logits_soft_cap={case.soft_cap!r})
        NAMES = ("q", "k_pages", "v_pages", "block_tables", "lengths", "k_scales_pages",
                 "v_scales_pages")


        def run_kernel(x):
            with jax.default_matmul_precision("highest"):
                out = jax.jit(lambda *a: kernel(*a, **OPTIONS))(*(x.get(n) for n in NAMES))
            return dict(out=out)
    '''
    kv = '''
        k = np.asarray(x["k_pages"], np.float32)
        v = np.asarray(x["v_pages"], np.float32)
    '''
    if case.quantized:
        kv += '''
        k = k * x["k_scales_pages"][..., None]  # int8 pages times per-token scales
        v = v * x["v_scales_pages"][..., None]
        '''
    kv = "\n".join(line.strip() for line in kv.strip().splitlines())
    lengths = [case.length(b) for b in range(case.batch)]
    return ExportSnippet(
        default_import="from jax.experimental.pallas.ops.gpu.paged_attention import "
        "paged_attention as kernel",
        run_kernel=run_kernel,
        reference=reference_source(table="block_tables", kv_values=kv, lengths=lengths,
                                   page_size=case.page_size, soft_cap=case.soft_cap),
        outputs=("out",),
    )
