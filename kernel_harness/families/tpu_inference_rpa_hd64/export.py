"""Standalone repro source for one tpu-inference-rpa-v3-hd64 case (``kernel-harness
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
from kernel_harness.families.tpu_inference_rpa_hd64.cases import RpaHd64Case
from kernel_harness.families.tpu_inference_rpa_hd64.kernel import PROGRAM, operand_names
from kernel_harness.records.export import ExportSnippet


def export(case: RpaHd64Case) -> ExportSnippet:
    """The kernel with the case's blocks (TPU interpret mode inside the embedded extensions
    on interpret), and the exact cache update plus the ragged op (with the sinks) over the
    updated cache."""
    default_import = loader_source('''

        _RPA = kernel_module("ragged_paged_attention.v3.kernel_hd64")


        def kernel(*operands, **options):
            """The head_dim-64 v3 kernel."""
            return _RPA.ragged_paged_attention_hd64.__wrapped__(*operands, **options)
    ''')
    options = script_options(PROGRAM, case)
    run_kernel = run_kernel_source(options, operand_names(case), "kv_cache")
    reference = kv_update_reference_source(case)
    return ExportSnippet(default_import=default_import, run_kernel=run_kernel,
                         reference=reference, outputs=("out", "kv_cache"))
