"""Standalone repro source for one flywheel-tpu-rotary case (``kernel-harness
export-repro``): the adapter's Pallas kernel around flywheel-tpu's ``rotate_tile`` (its
source embedded) under forced TPU interpret mode, and the op's reference
(:mod:`kernel_harness.ops.rotary.export`)."""

from __future__ import annotations

import inspect
import textwrap

import numpy as np

from kernel_harness.families.flywheel_tpu_rotary import kernel as _kernel
from kernel_harness.families.flywheel_tpu_rotary.cases import FlywheelRotaryCase
from kernel_harness.ops.rotary.export import reference_source
from kernel_harness.records.export import ExportSnippet, tpu_interpreting_source

_PRELUDE = '''
import functools
from typing import Any

from flywheel_tpu.pallas import rotary as _flywheel_rotary
from jax.experimental import pallas as pl


def _module():
    return _flywheel_rotary
'''


def export(case: FlywheelRotaryCase) -> ExportSnippet:
    """The adapter's kernel with the case's pairing and tile, and the op's reference."""
    default_import = "\n\n".join([_PRELUDE, inspect.getsource(_kernel.rotate_kernel),
                                  inspect.getsource(_kernel.rotary), "kernel = rotary\n"])
    options = dict(interleaved=case.pairing == "interleaved",
                   head_dim_minor=case.head_dim_minor, block_tokens=case.block_tokens)
    lengths = dict(cu_seqlens=[0, *np.cumsum(case.seq_lens).tolist()],
                   seq_ends=list(case.seq_ends))
    run_kernel = tpu_interpreting_source(1) + textwrap.dedent(f'''

        OPTIONS = {options!r}
        LENGTHS = {{k: np.asarray(v, np.int32) for k, v in {lengths!r}.items()}}


        def run_kernel(x):
            fn = jax.jit(lambda *ops: kernel(*ops, **LENGTHS, **OPTIONS))
            operands = [jnp.asarray(x[n]) for n in ("x", "cos", "sin")]
            with interpreting():
                out = jax.block_until_ready(fn(*operands))
            return dict(out=np.asarray(out, np.float32))
    ''')
    return ExportSnippet(default_import=default_import, run_kernel=run_kernel,
                         reference=reference_source(case, gradients=False), outputs=("out",))
