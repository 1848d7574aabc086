"""What a tpu-inference-rpa-v3 case reaches (events), and the cases tried first."""

from __future__ import annotations

from kernel_harness.families.tpu_inference_rpa_v3.cases import RpaV3Case
from kernel_harness.ops.paged_attention.passes import SEED_LAYOUTS, passes_events
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
    """The op's two seed layouts (:data:`~kernel_harness.ops.paged_attention.passes.
    SEED_LAYOUTS`): all three passes in one call with GQA and compute blocks below the
    fetched ones, on v6 in float32; the mixed call in bfloat16 with MQA and head_dim 64 on
    v7."""
    del without
    three_passes, mixed = SEED_LAYOUTS
    return (
        RpaV3Case(**three_passes, dtype="float32", seed=11, q_heads=4, kv_heads=2,
                  d_blocks=(1, 16, 1, 8), p_blocks=(4, 16, 2, 8), m_blocks=(8, 32, 4, 8),
                  tpu_version=6),
        RpaV3Case(**mixed, dtype="bfloat16", seed=12, q_heads=4, kv_heads=1, head_dim=64,
                  d_blocks=(1, 16, 1, 16), p_blocks=(8, 16, 8, 16), m_blocks=(8, 16, 8, 16),
                  tpu_version=7),
    )
