"""Standalone repro source for one flywheel-tpu-varlen-paged case (``kernel-harness
export-repro``): ``flash_attn_varlen_func`` over the paged cache with the case's options,
and the reference (the attention op's ``visibility`` and ``attend``, whose source the
script embeds) over each active sequence, q rounded as the library rounds it."""

from __future__ import annotations

from kernel_harness.families.flywheel_tpu import merged_cache
from kernel_harness.families.flywheel_tpu_varlen_paged.cases import FlywheelVarlenPagedCase
from kernel_harness.ops.attention.export import reference_source
from kernel_harness.records.export import ExportSnippet


def export(case: FlywheelVarlenPagedCase) -> ExportSnippet:
    """The library's call and the per-sequence reference (rows past the active sequences'
    queries stay 0, as the library returns them)."""
    left = -1 if case.window_left is None else case.window_left
    run_kernel = f'''
        OPTIONS = dict(softmax_scale={None if case.default_scale else case.sm_scale!r},
                       causal={case.causal!r}, window_size=({left}, -1),
                       softcap={case.soft_cap or 0.0!r}, block_sizes={case.blocks!r},
                       interpret=INTERPRET)


        @jax.jit
        def _kernel(q, kv_cache, cu_seqlens_q, seqused_k, block_table, num_active):
            return kernel(q, kv_cache, None, cu_seqlens_q, None, {case.max_tokens},
                          {case.capacity}, block_table=block_table, seqused_k=seqused_k,
                          num_active=num_active, **OPTIONS)


        def run_kernel(x):
            return dict(out=_kernel(*(jnp.asarray(x[n]) for n in (
                "q", "kv_cache", "cu_seqlens_q", "seqused_k", "block_table", "num_active"))))
    '''
    q_value = merged_cache.rounded_q_source(case.sm_scale, case.soft_cap, 'x["q"]')
    split = merged_cache.SPLIT_SOURCE.replace("\n", "\n            ")
    window = "None" if case.window_left is None else f"({case.window_left}, None)"
    reference = reference_source(f'''
        def reference(x):
            """Per active sequence: its tokens through its block_table row, queries at its
            last positions, float32 at HIGHEST; q rounded as the library rounds it."""
            {split}
            q = np.asarray({q_value})  # the library's q rounding
            table = np.asarray(x["block_table"])
            out = np.zeros(q.shape, np.float32)
            start = 0
            for i, (q_len, kv_len) in enumerate(zip({case.q_lens!r}, {case.kv_lens!r})):
                t = np.arange(kv_len)
                page, slot = table[i, t // {case.page_size}], t % {case.page_size}
                kk, vv = (jnp.asarray(p[:, page, slot].transpose(1, 0, 2)) for p in (k, v))
                vis = visibility(q_len, kv_len, causal={case.causal!r}, q_offset=kv_len - q_len,
                                 window={window}, xp=np)
                qq = jnp.asarray(q[:, start:start + q_len].transpose(1, 0, 2))
                o, _ = attend(qq[None], kk[None], vv[None], jnp.asarray(vis), 1.0,
                              layout="bqhd", soft_cap={case.soft_cap!r})
                out[:, start:start + q_len] = np.asarray(o[0], np.float32).transpose(1, 0, 2)
                start += q_len
            return dict(out=out)
    ''')
    return ExportSnippet(
        default_import="from flywheel_tpu.flash_attn_interface import "
        "flash_attn_varlen_func as kernel",
        run_kernel=run_kernel, reference=reference, outputs=("out",))
