"""Standalone repro source for one flywheel-tpu-flash case (``kernel-harness
export-repro``): ``flash_attn_func`` with the case's options, and the attention op's
reference (its source embedded: :func:`kernel_harness.ops.attention.export.call_source`)."""

from __future__ import annotations

from kernel_harness.families.flywheel_tpu_flash.cases import FlywheelFlashCase
from kernel_harness.ops.attention.export import call_source
from kernel_harness.ops.attention.record import definition
from kernel_harness.records.export import ExportSnippet


def export(case: FlywheelFlashCase) -> ExportSnippet:
    """The library's call with the case's options, forward and vjp, and its reference."""
    run_kernel = f'''
        OPTIONS = dict(softmax_scale={case.scale!r}, causal={case.is_causal},
                       interpret=INTERPRET)


        @jax.jit
        def _kernel_fwd_bwd(q, k, v, do):
            out, vjp = jax.vjp(lambda q, k, v: kernel(q, k, v, **OPTIONS), q, k, v)
            return dict(zip(("out", "dq", "dk", "dv"), (out, *vjp(do)), strict=True))


        def run_kernel(x):
            return _kernel_fwd_bwd(*(jnp.asarray(x[n]) for n in ("q", "k", "v", "do")))
    '''
    reference = call_source(
        definition(case), vis=f"visibility({case.q_len}, {case.kv_len}, "
        f"causal={case.is_causal}, q_offset={case.kv_len - case.q_len})",
        arrays={n: f'x["{n}"]' for n in ("q", "k", "v", "do")},
        outputs={n: n for n in ("out", "dq", "dk", "dv")},
        doc="Softmax attention in float32, HIGHEST (the attention op, its source above); "
        "causal aligned bottom-right (query i at key position i + kv_len - q_len).")
    return ExportSnippet(
        default_import="from flywheel_tpu.flash_attn_interface import flash_attn_func as kernel",
        run_kernel=run_kernel, reference=reference, outputs=("out", "dq", "dk", "dv"))
