"""What a tpu-inference-rpa-v3-hd64 case reaches (events), and the cases tried first."""

from __future__ import annotations

from kernel_harness.core.case import dtype_packing
from kernel_harness.families.tpu_inference_rpa_hd64.cases import RpaHd64Case
from kernel_harness.ops.paged_attention.passes import SEED_LAYOUTS, passes_events
from kernel_harness.ops.paged_attention.strategy import head_grouping


def events(case: RpaHd64Case) -> list[str]:
    """The passes' events (:func:`~kernel_harness.ops.paged_attention.passes.passes_events`),
    heads (and a padding head in a packed word), sinks, the quantized cache, and the
    blocks: kv blocks spanned, query blocks spanned."""
    bkv = case.kv_pages_per_block * case.page_size
    ev = passes_events(case) + [head_grouping(case.q_heads, case.kv_heads)]
    ev += [name for name, on in (
        ("padding-kv-head", case.kv_heads % dtype_packing(case.cache_dtype) != 0),
        ("attention-sinks", case.sinks),
        ("fp8-kv-cache", case.kv_dtype is not None), ("q-quantized", case.q_scale is not None),
        ("kv-scales", case.k_scale is not None or case.v_scale is not None),
        ("multi-kv-block", any(kv > bkv for kv in case.kv_lens)),
        ("multi-q-block", any(q > case.queries_per_block for q in case.q_lens))) if on]
    return sorted(set(ev))


def seed_cases(without: frozenset[str]) -> tuple[RpaHd64Case, ...]:
    """The op's two seed layouts (:data:`~kernel_harness.ops.paged_attention.passes.
    SEED_LAYOUTS`): all three passes in one call with GQA, several kv and query blocks and
    sinks, in float32; the mixed call in bfloat16 with 3 kv heads (a padding head) and
    two query heads each, without sinks."""
    three_passes, mixed = SEED_LAYOUTS
    return (
        RpaHd64Case(**three_passes, dtype="float32", seed=11, q_heads=4, kv_heads=2,
                    kv_pages_per_block=1, queries_per_block=4, sinks="sinks" not in without),
        RpaHd64Case(**mixed, dtype="bfloat16", seed=12, q_heads=6, kv_heads=3,
                    kv_pages_per_block=2, queries_per_block=8),
    )
