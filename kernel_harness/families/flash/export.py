"""Standalone repro source for one flash case (``kernel-harness export-repro``).

The kernel has no ``interpret`` argument: on the interpret backend the script traces and
runs it under ``pltpu.force_tpu_interpret_mode`` with the harness's plain settings (no race
detection, zeroed scratch, one core), as ``Backend.forcing_interpret`` does.
"""

from __future__ import annotations

import textwrap

from kernel_harness.families.flash.cases import FlashCase
from kernel_harness.ops.attention.export import call_source
from kernel_harness.ops.attention.record import definition
from kernel_harness.records.export import ExportSnippet, tpu_interpreting_source

_DEFAULT = "from jax.experimental.pallas.ops.tpu.flash_attention import flash_attention as kernel"


def export(case: FlashCase) -> ExportSnippet:
    """The call with the case's blocks and options, and its reference (visibility from the
    segment ids and causal flag; bias added before scaling, the kernel's placement)."""
    blocks = ", ".join(f"{n}={v}" for n, v in sorted(case.block_sizes.items()))
    segs, bias = case.q_segments is not None, case.bias is not None
    names = ("q", "k", "v", "ab") if bias else ("q", "k", "v")
    grads = ("dq", "dk", "dv", "dab") if bias else ("dq", "dk", "dv")
    segments = ('(jnp.asarray(x["segment_ids_q"]), jnp.asarray(x["segment_ids_kv"]))'
                if segs else "None")
    run_kernel = tpu_interpreting_source(cores=1) + textwrap.dedent(f'''
        from jax.experimental.pallas.ops.tpu import flash_attention as fa

        BLOCKS = fa.BlockSizes({blocks})


        @jax.jit
        def _kernel_fwd_bwd(x):
            segs = {"fa.SegmentIds(q=x['segment_ids_q'], kv=x['segment_ids_kv'])" if segs
                    else None}

            def f({", ".join(names)}):
                return kernel(q, k, v, {"ab" if bias else "None"}, segs,
                              causal={case.is_causal}, sm_scale={case.effective_scale!r},
                              block_sizes=BLOCKS)

            out, vjp = jax.vjp(f, *(x[n] for n in {names!r}))
            return dict(zip({("out", *grads)!r}, (out, *vjp(x["do"])), strict=True))


        def run_kernel(x):
            with interpreting():
                return jax.block_until_ready(_kernel_fwd_bwd(x))
    ''')
    reference = call_source(
        definition(case), vis=f"visibility({case.q_len}, {case.kv_len}, "
        f"causal={case.is_causal}, segments={segments})",
        arrays={n: f'x["{n}"]' for n in ("q", "k", "v", "do")}
        | ({"bias": 'x["ab"]'} if bias else {}),
        outputs={n: n for n in ("out", "dq", "dk", "dv")} | ({"dbias": "dab"} if bias else {}),
        doc="Softmax attention in float32, HIGHEST: logits = (q.k^T + ab) * sm_scale, masked "
        "keys get exactly zero weight, rows that see no key give 0.")
    return ExportSnippet(default_import=_DEFAULT, run_kernel=run_kernel, reference=reference,
                         outputs=("out", *grads))
