"""Standalone repro source for one tpu-inference-rpa-v3-hd64 case (``kernel-harness
export-repro``): tpu-inference's loader (no vLLM), the harness's interpreter extensions and
the ragged op's reference, embedded verbatim."""

from __future__ import annotations

from kernel_harness.families.tpu_inference_ragged import (
    ragged_reference_source,
    run_kernel_source,
)
from kernel_harness.families.tpu_inference_record import loader_source
from kernel_harness.families.tpu_inference_rpa_hd64.cases import RpaHd64Case
from kernel_harness.families.tpu_inference_rpa_hd64.kernel import operand_names
from kernel_harness.spec.export import ExportSnippet


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
    options = dict(sm_scale=case.sm_scale, sliding_window=case.sliding_window,
                   soft_cap=case.soft_cap, chunk_prefill_size=case.chunk_prefill_size,
                   num_kv_pages_per_block=case.kv_pages_per_block,
                   num_queries_per_block=case.queries_per_block, q_scale=case.q_scale,
                   k_scale=case.k_scale, v_scale=case.v_scale)
    run_kernel = run_kernel_source(options, operand_names(case), "kv_cache")
    fields = {f: getattr(case, f) for f in (
        "q_lens", "kv_lens", "kv_heads", "page_size", "pages_per_seq", "q_scale", "k_scale",
        "v_scale", "cache_dtype")}
    reference = ragged_reference_source(fields, f'''
        def reference(x):
            """The cache with the new tokens written at each sequence's last q_len
            positions (kv head h's K in lanes 0-63 of row h, its V in 64-127), then per
            sequence its keys read back page by page and dequantized, the causal (and
            window) mask, the sinks, a float32 softmax."""
            c = CASE
            table = np.asarray(x["page_indices"]).reshape(-1, c["pages_per_seq"])
            cache = np.array(x["kv_cache"]).astype(np.float32)
            rows = cache.reshape(*cache.shape[:2], -1, cache.shape[-1])
            q_all = np.asarray(x["q"]).astype(np.float32)
            if c["q_scale"] is not None:  # q as the kernel quantizes it
                top = float(jnp.finfo(c["cache_dtype"]).max)
                q_fp8 = np.clip(q_all / c["q_scale"], -top, top).astype(c["cache_dtype"])
                q_all = q_fp8.astype(np.float32) * c["q_scale"]
            k_scale, v_scale = c["k_scale"] or 1.0, c["v_scale"] or 1.0
            sinks = x.get("attention_sink")
            sinks = None if sinks is None else jnp.asarray(sinks, jnp.float32)
            out = np.zeros(q_all.shape, np.float32)
            h, ps = c["kv_heads"], c["page_size"]
            start = 0
            for i, (q_len, kv_len) in enumerate(zip(c["q_lens"], c["kv_lens"], strict=True)):
                for j in range(q_len):
                    pos = kv_len - q_len + j
                    page, slot = table[i, pos // ps], pos % ps
                    rows[page, slot, :h, :64] = np.asarray(x["k"][start + j], np.float32)
                    rows[page, slot, :h, 64:] = np.asarray(x["v"][start + j], np.float32)
                    rows[page, slot, h:] = 0
                start += q_len
            start = 0
            for i, (q_len, kv_len) in enumerate(zip(c["q_lens"], c["kv_lens"], strict=True)):
                t = np.arange(kv_len)
                tokens = rows[table[i, t // ps], t % ps][:, :h]
                o = attend_sequence(
                    jnp.asarray(q_all[start:start + q_len]),
                    jnp.asarray(tokens[..., :64] * k_scale),
                    jnp.asarray(tokens[..., 64:] * v_scale),
                    jnp.asarray(allowed(q_len, kv_len, {case.sliding_window!r})),
                    sm_scale={case.sm_scale!r}, soft_cap={case.soft_cap!r}, ratio=0,
                    sinks=sinks)
                out[start:start + q_len] = np.asarray(o, np.float32)
                start += q_len
            return dict(out=out, kv_cache=rows.reshape(cache.shape))
        ''')
    return ExportSnippet(default_import=default_import, run_kernel=run_kernel,
                         reference=reference, outputs=("out", "kv_cache"))
