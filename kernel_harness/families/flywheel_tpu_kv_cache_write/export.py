"""Standalone repro source for one flywheel-tpu-kv-cache-write case
(``kernel-harness export-repro``): flywheel-tpu's writer under forced TPU interpret mode
and the op's reference, its source embedded (:mod:`kernel_harness.ops.kv_cache_write.
export`)."""

from __future__ import annotations

import textwrap

from kernel_harness.families.flywheel_tpu_kv_cache_write.cases import FlywheelKvWriteCase
from kernel_harness.ops.kv_cache_write.export import reference_source
from kernel_harness.records.export import ExportSnippet, tpu_interpreting_source

_DEFAULT = '''
from flywheel_tpu.pallas.kv_cache_write import write_kv_cache_pages as kernel
'''


def export(case: FlywheelKvWriteCase) -> ExportSnippet:
    """The writer on the case's pieces table, and the op's reference."""
    run_kernel = tpu_interpreting_source(1) + textwrap.dedent('''

        def _bits(cache):
            return np.asarray(cache).view(np.uint16).astype(np.float32)


        def run_kernel(x):
            fn = jax.jit(lambda *ops: kernel(*ops, interpret=False))
            operands = [jnp.asarray(x[n]) for n in ("k", "v", "kv_cache", "slices",
                                                    "num_slices")]
            with interpreting():
                cache = jax.block_until_ready(fn(*operands))
            cache = np.asarray(cache)
            return dict(kv_cache=np.asarray(cache, np.float32), kv_cache_bits=_bits(cache))
    ''')
    return ExportSnippet(default_import=_DEFAULT, run_kernel=run_kernel,
                         reference=reference_source(case), outputs=("kv_cache", "kv_cache_bits"))
