"""Standalone repro source for one flywheel-tpu-varlen case (``kernel-harness
export-repro``): the batch rows packed as the adapter packs them, ``flash_attn_varlen_func``
with the case's options, out and lse unpacked, and the attention op's reference (its source
embedded: :func:`kernel_harness.ops.attention.export.call_source`)."""

from __future__ import annotations

import inspect
import textwrap

from kernel_harness.families.flywheel_tpu_varlen import kernel as _kernel
from kernel_harness.families.flywheel_tpu_varlen.cases import FlywheelVarlenCase
from kernel_harness.ops.attention.export import call_source
from kernel_harness.ops.attention.record import definition
from kernel_harness.records.export import ExportSnippet


def export(case: FlywheelVarlenCase) -> ExportSnippet:
    """The library's call with the case's options on the packed rows, and its reference."""
    b, t, s = case.batch, case.q_len, case.kv_len
    window = (-1, -1) if case.window is None else case.window
    lengths = {n: f'jnp.asarray(x["{n}"])' if getattr(case, n) is not None else "None"
               for n in ("q_lengths", "kv_lengths")}
    helpers = "\n\n".join(inspect.getsource(f) for f in (_kernel.packing, _kernel.packed))
    run_kernel = textwrap.indent(helpers, " " * 8) + f'''

        OPTIONS = dict(softmax_scale={case.scale!r}, causal={case.is_causal},
                       window_size={window!r}, return_softmax_lse=True,
                       interpret=INTERPRET, block_sizes={case.blocks!r})


        def run_kernel(x):
            q_order, cu_q = packing({lengths["q_lengths"]}, {b}, {t})
            k_order, cu_k = packing({lengths["kv_lengths"]}, {b}, {s})
            q, k, v = (jnp.asarray(x[n]) for n in ("q", "k", "v"))
            out, lse = kernel(packed(q, q_order), packed(k, k_order), packed(v, k_order),
                              cu_q, cu_k, {t}, {s}, **OPTIONS)
            out = jnp.zeros_like(out).at[:, q_order].set(out)
            lse = jnp.zeros_like(lse).at[:, q_order].set(lse)
            return {{"out": jnp.swapaxes(out.reshape({case.q_heads}, {b}, {t}, -1), 0, 1),
                    "lse": jnp.swapaxes(lse.reshape({case.q_heads}, {b}, {t}), 0, 1)}}
    '''
    q_n = 'x["q_lengths"]' if case.q_lengths is not None else f"np.full({b}, {t})"
    kv_n = 'x["kv_lengths"]' if case.kv_lengths is not None else f"np.full({b}, {s})"
    reference = call_source(
        definition(case), vis=f"visibility({t}, {s}, causal={case.is_causal}, "
        f"window={case.window!r}, q_lengths={q_n}, kv_lengths={kv_n}, "
        f"q_offset=np.asarray({kv_n}) - np.asarray({q_n}))",
        arrays={n: f'x["{n}"]' for n in ("q", "k", "v")},
        outputs={"out": "out", "lse": "lse"},
        doc="Softmax attention in float32, HIGHEST (the attention op, its source above); "
        "each batch row one sequence, causal and window aligned bottom-right on its own "
        "lengths.")
    return ExportSnippet(
        default_import="from flywheel_tpu.flash_attn_interface import flash_attn_varlen_func "
        "as kernel", run_kernel=run_kernel, reference=reference, outputs=("out", "lse"))
