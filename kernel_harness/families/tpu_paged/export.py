"""Standalone repro source for one tpu-paged case (``kernel-harness export-repro``)."""

from __future__ import annotations

import textwrap

from kernel_harness.families.tpu_paged.cases import INT8_DIVISOR, TpuPagedCase
from kernel_harness.ops.paged_attention.export import reference_source
from kernel_harness.records.export import ExportSnippet, tpu_interpreting_source


def export(case: TpuPagedCase) -> ExportSnippet:
    """The kernel call with the case's exact options (on interpret: under forced TPU
    interpret mode, two simulated cores for a megacore case), and the paged-decode
    reference with the contract's K/V (bfloat16-rounded, or int8 dequantized)."""
    cores = 2 if case.megacore_mode is not None else 1
    quant = ""
    if case.quantized:
        quant = '''
            from jax.experimental.pallas.ops.tpu.paged_attention.quantization_utils import (
                QuantizedTensor)
            k = QuantizedTensor(weight=k, scales=x["k_scales"])
            v = QuantizedTensor(weight=v, scales=x["v_scales"])'''
    run_kernel = tpu_interpreting_source(cores) + textwrap.dedent(f'''
        OPTIONS = dict(attn_logits_soft_cap={case.soft_cap!r},
                       pages_per_compute_block={case.pages_per_compute_block},
                       megacore_mode={case.megacore_mode!r}, inline_seq_dim={case.inline_seq_dim})


        def run_kernel(x):
            k, v = x["k_pages"], x["v_pages"]{quant}
            fn = jax.jit(lambda q, k, v, lengths, pages: kernel(q, k, v, lengths, pages,
                                                                **OPTIONS))
            with interpreting():
                out = jax.block_until_ready(fn(x["q"], k, v, x["lengths"], x["page_indices"]))
            return dict(out=out)
    ''')
    if case.quantized:
        kv = (f'k = x["k_pages"].astype(np.float64) * x["k_scales"] / {INT8_DIVISOR!r}\n'
              f'v = x["v_pages"].astype(np.float64) * x["v_scales"] / {INT8_DIVISOR!r}\n'
              "k, v = k.astype(np.float32), v.astype(np.float32)  # int8 dequantized")
    else:
        kv = ('k, v = (np.asarray(jnp.asarray(x[n], jnp.float32).astype(jnp.bfloat16), '
              'np.float32)\n        for n in ("k_pages", "v_pages"))  # the contract: '
              "K/V rounded to bfloat16")
    return ExportSnippet(
        default_import="from jax.experimental.pallas.ops.tpu.paged_attention import "
        "paged_attention as kernel",
        run_kernel=run_kernel,
        reference=reference_source(table="page_indices", kv_values=kv, lengths=case.lengths,
                                   page_size=case.page_size, soft_cap=case.soft_cap),
        outputs=("out",),
    )
