"""Standalone repro source for one tpu-inference-rpa-v3 case (``kernel-harness
export-repro``): tpu-inference's loader (no vLLM), the harness's interpreter extensions and
the ragged op's reference, embedded verbatim."""

from __future__ import annotations

from kernel_harness.families.tpu_inference_ragged import (
    ragged_reference_source,
    run_kernel_source,
)
from kernel_harness.families.tpu_inference_record import loader_source
from kernel_harness.families.tpu_inference_rpa_v3 import cases as _cases
from kernel_harness.spec.export import ExportSnippet


def export(case: _cases.RpaV3Case) -> ExportSnippet:
    """The kernel told the case's TPU generation, with the case's blocks (TPU interpret
    mode inside the embedded extensions on interpret), and the exact cache update plus
    the ragged op over the updated cache."""
    default_import = loader_source('''

        _RPA = kernel_module("ragged_paged_attention.v3.kernel")


        def kernel(*operands, tpu_version, **options):
            """The v3 kernel, traced with get_tpu_version() answering tpu_version."""
            saved = _RPA.get_tpu_version
            _RPA.get_tpu_version = lambda: tpu_version
            try:
                return _RPA.ragged_paged_attention.__wrapped__(*operands, **options)
            finally:
                _RPA.get_tpu_version = saved
    ''')
    options = dict(tpu_version=case.tpu_version, sm_scale=case.sm_scale,
                   sliding_window=case.sliding_window, soft_cap=case.soft_cap,
                   chunk_prefill_size=case.chunk_prefill_size, d_block_sizes=case.d_blocks,
                   p_block_sizes=case.p_blocks, m_block_sizes=case.m_blocks,
                   q_scale=case.q_scale, k_scale=case.k_scale, v_scale=case.v_scale)
    operands = ("q", "k", "v", "kv_cache", "kv_lens", "page_indices", "cu_q_lens",
                "distribution")
    run_kernel = run_kernel_source(options, operands, "kv_cache")
    fields = {f: getattr(case, f) for f in (
        "q_lens", "kv_lens", "kv_heads", "head_dim", "page_size", "pages_per_seq", "q_scale",
        "k_scale", "v_scale", "cache_dtype")}
    reference = ragged_reference_source(fields, f'''
        def reference(x):
            """The cache with the new tokens written at each sequence's last q_len
            positions (K in even, V in odd combined heads), then per sequence its keys
            read back page by page and dequantized, the causal (and window) mask, a float32
            softmax."""
            c = CASE
            table = np.asarray(x["page_indices"]).reshape(-1, c["pages_per_seq"])
            cache = np.array(x["kv_cache"]).astype(np.float32)
            flat = cache.reshape(*cache.shape[:2], -1, cache.shape[-1])
            q_all = np.asarray(x["q"]).astype(np.float32)
            if c["q_scale"] is not None:  # q as the kernel quantizes it
                top = float(jnp.finfo(c["cache_dtype"]).max)
                q_fp8 = np.clip(q_all / c["q_scale"], -top, top).astype(c["cache_dtype"])
                q_all = q_fp8.astype(np.float32) * c["q_scale"]
            k_scale, v_scale = c["k_scale"] or 1.0, c["v_scale"] or 1.0
            out = np.zeros(q_all.shape, np.float32)
            kvh, d, ps = 2 * c["kv_heads"], c["head_dim"], c["page_size"]
            start = 0
            for i, (q_len, kv_len) in enumerate(zip(c["q_lens"], c["kv_lens"], strict=True)):
                for j in range(q_len):
                    pos = kv_len - q_len + j
                    page, slot = table[i, pos // ps], pos % ps
                    flat[page, slot, 0:kvh:2, :d] = np.asarray(x["k"][start + j], np.float32)
                    flat[page, slot, 1:kvh:2, :d] = np.asarray(x["v"][start + j], np.float32)
                start += q_len
            start = 0
            for i, (q_len, kv_len) in enumerate(zip(c["q_lens"], c["kv_lens"], strict=True)):
                t = np.arange(kv_len)
                tokens = flat[table[i, t // ps], t % ps]
                o = attend_sequence(
                    jnp.asarray(q_all[start:start + q_len]),
                    jnp.asarray(tokens[:, 0:kvh:2, :d] * k_scale),
                    jnp.asarray(tokens[:, 1:kvh:2, :d] * v_scale),
                    jnp.asarray(allowed(q_len, kv_len, {case.sliding_window!r})),
                    sm_scale={case.sm_scale!r}, soft_cap={case.soft_cap!r}, ratio=0)
                out[start:start + q_len] = np.asarray(o, np.float32)
                start += q_len
            return dict(out=out, kv_cache=flat.reshape(cache.shape))
        ''')
    return ExportSnippet(default_import=default_import, run_kernel=run_kernel,
                         reference=reference, outputs=("out", "kv_cache"))
