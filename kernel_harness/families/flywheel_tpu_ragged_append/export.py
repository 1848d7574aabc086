"""Standalone repro source for one flywheel-tpu-ragged-append case (``kernel-harness
export-repro``): flywheel-tpu's append under forced TPU interpret mode and the op's
reference, its source embedded (:mod:`kernel_harness.ops.kv_cache_write.export`)."""

from __future__ import annotations

import textwrap

from kernel_harness.families.flywheel_tpu_ragged_append.cases import FlywheelAppendCase
from kernel_harness.ops.kv_cache_write.export import reference_source
from kernel_harness.records.export import ExportSnippet, tpu_interpreting_source

_DEFAULT = '''
from flywheel_tpu.pallas.flash_fwd_kvcache_varlen import append_ragged as kernel
'''


def export(case: FlywheelAppendCase) -> ExportSnippet:
    """The append on the case's operands, and the op's reference."""
    geometry = dict(page_size=case.page_size, pages_per_seq=case.pages_per_seq)
    run_kernel = tpu_interpreting_source(1) + textwrap.dedent(f'''

        GEOMETRY = {geometry!r}
        OPERANDS = ("kv_cache", "k", "v", "all_cu_new_lens", "all_cache_lens",
                    "flat_block_table", "num_active")


        def run_kernel(x):
            fn = jax.jit(lambda *ops: kernel(*ops, interpret=False, **GEOMETRY))
            with interpreting():
                cache = jax.block_until_ready(fn(*(jnp.asarray(x[n]) for n in OPERANDS)))
            cache = np.asarray(cache)
            bits = cache.view(np.uint16).astype(np.float32)
            return dict(kv_cache=np.asarray(cache, np.float32), kv_cache_bits=bits)
    ''')
    return ExportSnippet(default_import=_DEFAULT, run_kernel=run_kernel,
                         reference=reference_source(case),
                         outputs=("kv_cache", "kv_cache_bits"))
