"""Standalone repro source for one gpu-decode case (``kernel-harness export-repro``)."""

from __future__ import annotations

from kernel_harness.families.gpu_decode.cases import DecodeCase
from kernel_harness.ops.attention.export import reference_source
from kernel_harness.ops.attention.record import definition
from kernel_harness.records.export import ExportSnippet


def export(case: DecodeCase) -> ExportSnippet:
    """The kernel call (``gqa`` or ``mqa``) with the case's exact options, lse from its
    residuals, and a one-token reference with the case's start/end bounds."""
    start, end = (b.tolist() for b in case.bounds())
    run_kernel = f'''
        from jax.experimental.pallas.ops.gpu import decode_attention

        OPTIONS = dict(sm_scale={case.sm_scale!r}, block_h={case.block_h},
                       block_k={case.block_k}, k_splits={case.k_splits},
                       num_warps={case.num_warps}, num_stages={case.num_stages},
                       interpret=INTERPRET, return_residuals=True,
                       normalize_output={case.normalize_output})
        ENTRY = {case.entry!r}
        # Rows with no visible key: their lse must be -inf (the contract); the generic judge
        # below compares finite values, so an lse of exactly -inf there is written as 0 on
        # both sides (any other kernel value there, NaN included, still fails).
        NO_KEY = np.asarray({[e <= s for s, e in zip(start, end, strict=True)]!r})[:, None]


        def run_kernel(x):
            k, v = x["k"], x["v"]
            if kernel is decode_attention.gqa:  # the default: the case's entry point
                call, opts = decode_attention.gqa, OPTIONS
                if ENTRY == "mqa":  # called on the single kv head, squeezed
                    call, k, v = decode_attention.mqa, k[:, :, 0], v[:, :, 0]
            else:  # an --impl takes the harness's signature, entry included
                call, opts = kernel, dict(OPTIONS, entry=ENTRY)
            fn = jax.jit(lambda q, k, v, s, e: call(q, k, v, s, e, **opts))
            with jax.default_matmul_precision("highest"):
                out, (l, m) = fn(x["q"], k, v, x.get("start_idx"), x.get("kv_seq_len"))
            lse = np.asarray(m + jnp.log(l), np.float32)
            return dict(out=out, lse=np.where(NO_KEY & (lse == -np.inf), 0.0, lse))
    '''
    call = definition(case).attend_source()
    reference = reference_source(f'''
        def reference(x):
            """One-token attention in float32, HIGHEST (the attention op's ``attend``, its
            source above); keys start <= j < end visible."""
            q, k, v = (jnp.asarray(x[n], jnp.float32) for n in ("q", "k", "v"))
            q = q[:, None]  # one query per row
            vis = visibility(1, k.shape[1], kv_starts=np.asarray({start!r}),
                             kv_lengths=np.asarray({end!r}))
            out, lse = {call}
            lse = lse[:, :, 0]
            return dict(out=out[:, 0], lse=jnp.where(NO_KEY, 0.0, lse))  # -inf written as 0
    ''')
    return ExportSnippet(
        default_import="from jax.experimental.pallas.ops.gpu.decode_attention import "
        "gqa as kernel",
        run_kernel=run_kernel,
        reference=reference,
        outputs=("out", "lse"),
    )
