"""Standalone repro source for one tpu-inference-mla-v2 case (``kernel-harness
export-repro``): tpu-inference's loader (no vLLM), the harness's interpreter extensions and
the ragged op's reference, embedded verbatim."""

from __future__ import annotations

from kernel_harness.core.case import dtype_packing
from kernel_harness.families.tpu_inference_mla_v2 import cases as _cases
from kernel_harness.families.tpu_inference_ragged import (
    ragged_reference_source,
    run_kernel_source,
)
from kernel_harness.families.tpu_inference_record import loader_source
from kernel_harness.ops.paged_decode.passes import lanes
from kernel_harness.spec.export import ExportSnippet


def export(case: _cases.MlaV2Case) -> ExportSnippet:
    """The kernel with the case's options (TPU interpret mode inside the embedded
    extensions on interpret), and the exact cache update plus the attention op over the
    updated cache."""
    default_import = loader_source('''

        kernel = kernel_module("mla.v2.kernel").mla_ragged_paged_attention
    ''')
    options = dict(sm_scale=case.sm_scale, sliding_window=case.sliding_window,
                   soft_cap=case.soft_cap, chunk_prefill_size=case.chunk_prefill_size,
                   num_kv_pages_per_block=case.kv_pages_per_block,
                   num_queries_per_block=case.queries_per_block,
                   mixed_q_split=case.mixed_q_split, two_step_flash_attention=case.two_step,
                   p_same_dtype_as_v=case.p_like_v)
    operands = ("ql_nope", "q_pe", "new_kv_c", "new_k_pe", "cache_kv", "kv_lens",
                "page_indices", "cu_q_lens", "distribution")
    run_kernel = run_kernel_source(options, operands, "cache_kv",
                                   keywords=f's_dtype=jnp.dtype("{case.dtype}"), ')
    fields = {f: getattr(case, f) for f in (
        "q_lens", "kv_lens", "lkv_dim", "r_dim", "page_size", "pages_per_seq")}
    fields["packing"] = dtype_packing(case.dtype)
    fields["rope_lane"] = lanes(case.lkv_dim)
    reference = ragged_reference_source(fields, f'''
        def reference(x):
            """The cache with each new token's latent and rope key written into its slot
            (padding lanes zero), then per sequence the attention op over [latent | rope]
            keys with the latents as values."""
            c = CASE
            table = np.asarray(x["page_indices"]).reshape(-1, c["pages_per_seq"])
            cache = np.array(x["cache_kv"]).astype(np.float32)
            pk, ps, lkv = c["packing"], c["page_size"], c["lkv_dim"]
            r, rl = c["r_dim"], c["rope_lane"]
            q = np.concatenate([np.asarray(x["ql_nope"], np.float32).transpose(1, 0, 2),
                                np.asarray(x["q_pe"], np.float32)], axis=-1)
            out = np.zeros((q.shape[0], q.shape[1], lkv), np.float32)
            row = 0
            for i, (q_len, kv_len) in enumerate(zip(c["q_lens"], c["kv_lens"], strict=True)):
                for pos in range(kv_len - q_len, kv_len):
                    page, slot = table[i, pos // ps], pos % ps
                    token = np.zeros(cache.shape[-1], np.float32)
                    token[:lkv] = np.asarray(x["new_kv_c"][row], np.float32)
                    token[rl:rl + r] = np.asarray(x["new_k_pe"][row], np.float32)
                    cache[page, slot // pk, slot % pk] = token
                    row += 1
            start = 0
            for i, (q_len, kv_len) in enumerate(zip(c["q_lens"], c["kv_lens"], strict=True)):
                t = np.arange(kv_len)
                pages, slots = table[i, t // ps], t % ps
                tok = cache[pages, slots // pk, slots % pk]
                k = np.concatenate([tok[:, :lkv], tok[:, rl:rl + r]], -1)[:, None]
                o = attend_sequence(
                    jnp.asarray(q[start:start + q_len]), jnp.asarray(k),
                    jnp.asarray(tok[:, None, :lkv]),
                    jnp.asarray(allowed(q_len, kv_len, {case.sliding_window!r})),
                    sm_scale={case.sm_scale!r}, soft_cap={case.soft_cap!r}, ratio=0)
                out[start:start + q_len] = np.asarray(o, np.float32)
                start += q_len
            return dict(out=out.transpose(1, 0, 2), cache_kv=cache)
        ''')
    return ExportSnippet(default_import=default_import, run_kernel=run_kernel,
                         reference=reference, outputs=("out", "cache_kv"))
