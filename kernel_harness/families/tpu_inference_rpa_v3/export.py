"""Standalone repro source for one tpu-inference-rpa-v3 case (``kernel-harness
export-repro``): tpu-inference's loader (no vLLM), the harness's interpreter extensions and
the reference (the cache update and the ragged op, the kernel's layout functions),
embedded verbatim."""

from __future__ import annotations

from kernel_harness.families.tpu_inference.modules import loader_source
from kernel_harness.families.tpu_inference.ragged import (
    kv_update_reference_source,
    run_kernel_source,
    script_options,
)
from kernel_harness.families.tpu_inference_rpa_v3 import cases as _cases
from kernel_harness.families.tpu_inference_rpa_v3 import kernel as _kernel
from kernel_harness.records.export import ExportSnippet


def export(case: _cases.RpaV3Case) -> ExportSnippet:
    """The kernel told the case's TPU generation, with the case's blocks (TPU interpret
    mode inside the embedded extensions on interpret), and the exact cache update plus
    the ragged op over the updated cache."""
    default_import = loader_source('''

        _RPA = kernel_module("ragged_paged_attention.v3.kernel")


        def kernel(*operands, tpu_version, **options):
            """The v3 kernel, traced with get_tpu_version() answering tpu_version."""
            saved = _RPA.get_tpu_version
            _RPA.get_tpu_version = lambda: tpu_version
            try:
                return _RPA.ragged_paged_attention.__wrapped__(*operands, **options)
            finally:
                _RPA.get_tpu_version = saved
    ''')
    options = script_options(_kernel.PROGRAM, case)
    operands = ("q", "k", "v", "kv_cache", "kv_lens", "page_indices", "cu_q_lens",
                "distribution")
    run_kernel = run_kernel_source(options, operands, "kv_cache")
    reference = kv_update_reference_source(case)
    return ExportSnippet(default_import=default_import, run_kernel=run_kernel,
                         reference=reference, outputs=("out", "kv_cache"))
