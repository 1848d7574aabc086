"""What a tpu-inference-rpa-v3 case reaches (events), and the cases tried first."""

from __future__ import annotations

from kernel_harness.families.tpu_inference_rpa_v3.cases import RpaV3Case
from kernel_harness.ops.paged_attention.passes import passes_events
from kernel_harness.ops.paged_attention.strategy import head_grouping


def events(case: RpaV3Case) -> list[str]:
    """The passes' events (:func:`~kernel_harness.ops.paged_attention.passes.passes_events`),
    heads, the TPU generation, padded lanes, and per pass: kv blocks spanned, compute
    blocks below fetched ones."""
    ev = passes_events(case) + [head_grouping(case.q_heads, case.kv_heads),
                                f"tpu-v{case.tpu_version}"]
    if case.head_dim % 128:
        ev.append("head-dim-padded")
    ev += [name for name, on in (
        ("fp8-kv-cache", case.kv_dtype is not None), ("q-quantized", case.q_scale is not None),
        ("kv-scales", case.k_scale is not None or case.v_scale is not None)) if on]
    for (bq, bkv, bq_c, bkv_c), (lo, hi) in zip(
            (case.d_blocks, case.p_blocks, case.m_blocks), case.pass_bounds(), strict=True):
        q_lens, kv_lens = case.q_lens[lo:hi], case.kv_lens[lo:hi]
        if not q_lens:
            continue
        ev += [name for name, on in (
            ("multi-kv-block", any(kv > bkv for kv in kv_lens)),
            ("kv-compute-block-below-fetch", bkv_c < bkv),
            ("q-compute-block-below-fetch", bq_c < bq and any(q > bq_c for q in q_lens)),
            ("multi-q-block", any(q > bq for q in q_lens))) if on]
    return sorted(set(ev))


def seed_cases(without: frozenset[str]) -> tuple[RpaV3Case, ...]:
    """All three passes in one call (two decode steps, two prefill chunks, a mixed pair)
    with padding, GQA, a window and compute blocks below the fetched ones, on v6 in
    float32; and a bfloat16 mixed call with MQA, a soft cap and head_dim 64 on v7."""
    del without
    return (
        RpaV3Case(dtype="float32", seed=11, q_lens=(1, 1, 5, 5, 1, 9), decode_seqs=2,
                  kv_lens=(7, 24, 5, 17, 32, 16), prefill_seqs=2, chunk_prefill_size=5,
                  max_num_seqs=7, max_tokens=24, q_heads=4, kv_heads=2, page_size=8,
                  pages_per_seq=4, d_blocks=(1, 16, 1, 8), p_blocks=(4, 16, 2, 8),
                  m_blocks=(8, 32, 4, 8), sliding_window=12, sm_scale=0.5,
                  logit_scale=4.0, tpu_version=6),
        RpaV3Case(dtype="bfloat16", seed=12, q_lens=(3, 1, 16), kv_lens=(30, 9, 16),
                  max_num_seqs=3, max_tokens=22, q_heads=4, kv_heads=1, head_dim=64,
                  page_size=16, pages_per_seq=2, d_blocks=(1, 16, 1, 16), p_blocks=(8, 16, 8, 16),
                  m_blocks=(8, 16, 8, 16), soft_cap=20.0,
                  tpu_version=7),
    )
