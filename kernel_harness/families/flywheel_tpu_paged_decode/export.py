"""Standalone repro source for one flywheel-tpu-paged-decode case (``kernel-harness
export-repro``): ``flash_attn_with_kvcache`` on the paged cache with the case's options,
and the paged op's reference (:func:`kernel_harness.ops.paged_attention.export.
reference_source`) with the library's q rounding."""

from __future__ import annotations

from kernel_harness.families.flywheel_tpu import merged_cache
from kernel_harness.families.flywheel_tpu_paged_decode.cases import FlywheelDecodeCase
from kernel_harness.ops.paged_attention.export import reference_source
from kernel_harness.records.export import ExportSnippet


def export(case: FlywheelDecodeCase) -> ExportSnippet:
    """The library's call (one query token per row, no append) and its reference."""
    left = -1 if case.window_left is None else case.window_left
    run_kernel = f'''
        OPTIONS = dict(softmax_scale={case.scale!r}, window_size=({left}, -1),
                       softcap={case.soft_cap or 0.0!r}, interpret=INTERPRET)


        @jax.jit
        def _kernel(q, kv_cache, cache_seqlens, block_table):
            # one query token per row, no append; the returned cache is left out
            out = kernel(q[:, None], kv_cache, None, cache_seqlens=cache_seqlens,
                         block_table=block_table, **OPTIONS)[0]
            return out[:, 0]


        def run_kernel(x):
            return dict(out=_kernel(*(jnp.asarray(x[n]) for n in (
                "q", "kv_cache", "cache_seqlens", "block_table"))))
    '''
    q_value = (merged_cache.rounded_q_source(case.softmax_scale, case.soft_cap, 'x["q"]')
               + "  # the library's q: rounded to bfloat16 after its fused scale")
    kv = merged_cache.SPLIT_SOURCE
    return ExportSnippet(
        default_import="from flywheel_tpu.flash_attn_interface import "
        "flash_attn_with_kvcache as kernel",
        run_kernel=run_kernel,
        reference=reference_source(table="block_table", kv_values=kv, lengths=case.lengths,
                                   page_size=case.page_size, soft_cap=case.soft_cap,
                                   window_left=case.window_left, q_value=q_value),
        outputs=("out",))
