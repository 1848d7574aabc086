"""Standalone repro source for one tpu-inference-mla-v2 case (``kernel-harness
export-repro``): tpu-inference's loader (no vLLM), the harness's interpreter extensions and
the reference (the latent cache update and the ragged op), embedded verbatim."""

from __future__ import annotations

from kernel_harness.families.tpu_inference.modules import loader_source
from kernel_harness.families.tpu_inference.ragged import (
    ragged_reference_source,
    run_kernel_source,
    script_options,
)
from kernel_harness.families.tpu_inference_mla_v2 import cases as _cases
from kernel_harness.families.tpu_inference_mla_v2 import kernel as _kernel
from kernel_harness.ops.paged_attention.passes import align, lanes
from kernel_harness.records.export import ExportSnippet


def export(case: _cases.MlaV2Case) -> ExportSnippet:
    """The kernel with the case's options (TPU interpret mode inside the embedded
    extensions on interpret), and the exact cache update plus the attention op over the
    updated cache."""
    default_import = loader_source('''

        kernel = kernel_module("mla.v2.kernel").mla_ragged_paged_attention
    ''')
    options = script_options(_kernel.PROGRAM, case, leave_out=("s_dtype",))
    operands = ("ql_nope", "q_pe", "new_kv_c", "new_k_pe", "cache_kv", "kv_lens",
                "page_indices", "cu_q_lens", "distribution")
    run_kernel = run_kernel_source(options, operands, "cache_kv",
                                   keywords=f's_dtype=jnp.dtype("{case.dtype}"), ')
    reference = ragged_reference_source(
        (align, lanes, _cases.updated_cache, _cases.sequence_latents, _cases.mla_attention),
        {f: getattr(case, f) for f in _cases.REFERENCE_FIELDS},
        pages_per_seq=case.pages_per_seq,
        call=f"{_cases.mla_attention.__name__}(x, table, **CASE)",
        doc="The latent cache update, then the attention op over [latent | rope] keys with "
            "the latents as values.")
    return ExportSnippet(default_import=default_import, run_kernel=run_kernel,
                         reference=reference, outputs=("out", "cache_kv"))
