"""What a tpu-inference-mla-v2 case reaches (events), and the cases tried first."""

from __future__ import annotations

from kernel_harness.families.tpu_inference_mla_v2.cases import BFLOAT16_RUNS, MlaV2Case
from kernel_harness.ops.paged_attention.passes import SEED_LAYOUTS, passes_events


def events(case: MlaV2Case) -> list[str]:
    """The passes' events (:func:`~kernel_harness.ops.paged_attention.passes.passes_events`),
    the kernel's variants, padded lanes, odd head counts, kv blocks spanned."""
    ev = passes_events(case)
    ev += [name for name, on in (
        ("mixed-q-split", case.mixed_q_split > 1 and case.pass_bounds()[2][1] >
         case.pass_bounds()[2][0]),
        ("one-step-flash", not case.two_step), ("p-in-s-dtype", not case.p_like_v),
        ("rope-padded", case.r_dim % 128 != 0), ("odd-heads", case.q_heads % 2 == 1),
    ) if on]
    for pages, (lo, hi) in zip(case.kv_pages_per_block, case.pass_bounds(), strict=True):
        if any(kv > pages * case.page_size for kv in case.kv_lens[lo:hi]):
            ev.append("multi-kv-block")
    return sorted(set(ev))


def seed_cases(without: frozenset[str]) -> tuple[MlaV2Case, ...]:
    """The op's two seed layouts (:data:`~kernel_harness.ops.paged_attention.passes.
    SEED_LAYOUTS`): all three passes with kv blocks spanned (float32); the mixed call split
    two ways with three heads, a 128-lane rope and the one-step flash variant, in bfloat16
    where this jax runs it (else float32)."""
    del without
    three_passes, mixed = SEED_LAYOUTS
    return (
        MlaV2Case(**three_passes, dtype="float32", seed=21, q_heads=4,
                  kv_pages_per_block=(2, 1, 2), queries_per_block=(1, 4, 8)),
        MlaV2Case(**mixed, dtype="bfloat16" if BFLOAT16_RUNS else "float32", seed=22,
                  q_heads=3, r_dim=128, kv_pages_per_block=(1, 1, 1),
                  queries_per_block=(1, 8, 8), mixed_q_split=2, two_step=False),
    )
