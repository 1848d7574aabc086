"""The flywheel-tpu-varlen-paged family: flywheel-tpu's ``flash_attn_varlen_func`` with a
block table (ragged prefill and decode over the merged paged cache, ``num_active``) on the
ragged paged attention op (its reference over the library's merged cache), the library's
q rounding (its precision design) modelled in the reference and its twin."""

from __future__ import annotations

from typing import Any

import numpy as np

from kernel_harness.core.tolerance import Tolerance, ToleranceTable, standard_floor
from kernel_harness.families.flywheel_tpu import library, merged_cache
from kernel_harness.families.flywheel_tpu_varlen_paged import kernel as _kernel
from kernel_harness.families.flywheel_tpu_varlen_paged.cases import (
    OPTIONAL,
    FlywheelVarlenPagedCase,
    flywheel_varlen_paged_cases,
)
from kernel_harness.families.flywheel_tpu_varlen_paged.export import export
from kernel_harness.families.flywheel_tpu_varlen_paged.metamorphic import (
    METAMORPHIC,
    RELATIONS,
)
from kernel_harness.ops.attention.events import logits_label
from kernel_harness.ops.attention.reference import KERNEL_CORE
from kernel_harness.ops.attention.tolerance import ATTENTION_CALIBRATED
from kernel_harness.ops.paged_attention.ragged import ragged_attention
from kernel_harness.ops.paged_attention.ragged_record import ragged_record
from kernel_harness.ops.paged_attention.semantics import RAGGED
from kernel_harness.ops.paged_attention.sequences import page_slots
from kernel_harness.ops.paged_attention.strategy import head_grouping
from kernel_harness.records.family import Family
from kernel_harness.records.kernels import KernelExpectation

CONTRACT = f"""\
flywheel-tpu {library.TESTED_VERSION}'s flash_attn_varlen_func(q, kv_cache, None,
cu_seqlens_q, None, max_seqlen_q, max_seqlen_k, softmax_scale=, causal=, window_size=(left,
-1), softcap=, block_table=, seqused_k=, num_active=): ragged prefill and decode over a
paged cache, forward only. Install: {library.INSTALL} (Python >= 3.12).
The op (ragged paged attention), in the library's names: batch = max_num_seqs, num_active
= n, cu_seqlens_q = cu_q_lens, seqused_k = kv_lens, block_table = page_indices,
window_size[0] = sliding_window - 1:
{RAGGED}- The library's conventions: bfloat16 only; 128-token pages; q and out head-major
  [q_heads, tokens, head_dim]; one merged cache [pages, 128, 2 * kv_heads, head_dim] (K of
  kv head h in row 2h, V in 2h + 1); causal and windows bottom-right per sequence; causal
  False: a query sees every key of its sequence (a window still cuts on the left).
- Unlike the op's padding line above, the library specifies its padding rows: rows past
  the last active sequence's queries return 0 (checked, not excluded); sequences past
  num_active hold junk lengths, query boundaries and (valid) pages it must ignore.
- Precision design (the library's): q times softmax_scale * log2(e) (softmax_scale /
  softcap with a cap) in float32, rounded to bfloat16 in the kernel before QK^T; float32
  logits and base-2 softmax, P in bfloat16 for P.V, a bfloat16 output. The reference takes
  q as that rounded product divided back; the calibrated judge's yardstick rounds q, K, V
  and P to bfloat16 (no tolerance scale).
- The slots no active sequence owns hold K = 0, V = +-1e3 (a leak shows) or, with the
  optional feature nan-past-lengths, NaN (drawn: the decode kernel's finding,
  findings/flywheel-tpu-decode-nan-past-cache-seqlens/, is not this kernel's).
- Not covered: RoPE (rotary_cos/sin), return_softmax_lse, page sizes above 128, head_dim
  above 128, a traced num_active out of range, max_seqlen bounds below the true ones.
"""

_REASON = ("bfloat16 in and out, q rounded to bfloat16 after its fused scale (modelled in "
           "the reference), P rounded for P.V (the library's design); judged by the "
           "calibrated bound against the bfloat16 twin (at most 2x its error + 2^-8); the "
           "fixed limit serves checks without that yardstick")

TOLERANCES = ToleranceTable({("bfloat16", "out"): Tolerance(
    max_rel_err=2e-2, reason=_REASON, calibrated=ATTENTION_CALIBRATED,
    slice_floor=standard_floor("bfloat16", gradient=False))})


# The op's reference (ragged_attention) over the library's merged cache: the family's
# layout mapping.
def varlen_paged_attention(case: Any, inputs: dict[str, np.ndarray], **twin: Any
                           ) -> np.ndarray:
    """out float32 [q_heads, max_tokens, head_dim]: the active sequences' packed queries
    (rounded as the library rounds them: :func:`~kernel_harness.families.flywheel_tpu.
    merged_cache.rounded_q`, so the op's scale is 1) over their keys; rows past them are
    0. ``twin``: ragged_attention's ``dtype``/``precision``/``device``."""
    q = merged_cache.rounded_q(inputs["q"], case.sm_scale, case.soft_cap).transpose(1, 0, 2)
    k_pages, v_pages = merged_cache.split(inputs["kv_cache"])
    table = np.asarray(inputs["block_table"])
    kv = []
    for i, kv_len in enumerate(case.kv_lens):
        page, slot = page_slots(table[i], kv_len, case.page_size)
        kv.append(tuple(p[:, page, slot].transpose(1, 0, 2) for p in (k_pages, v_pages)))
    window = None if case.window_left is None else case.window_left + 1
    out = ragged_attention(q, kv, case.q_lens, case.kv_lens, sm_scale=1.0,
                           soft_cap=case.soft_cap, window=window, causal=case.causal, **twin)
    return out.transpose(1, 0, 2)


def reference(case: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """out [q_heads, max_tokens, head_dim] in float32 (:func:`varlen_paged_attention`)."""
    return {"out": varlen_paged_attention(case, inputs)}


def low_precision_reference(case: Any, inputs: dict[str, np.ndarray], backend: Any
                            ) -> dict[str, np.ndarray]:
    """The calibrated judge's yardstick: the same math with q, K, V and the softmax weights
    in bfloat16, default dot precision, on ``backend``'s device."""
    return {"out": varlen_paged_attention(case, inputs, dtype=case.dtype, precision=None,
                                          device=backend.device)}


def events(case: FlywheelVarlenPagedCase) -> list[str]:
    """Sequence kinds, padding, page edges, heads and the library's knobs."""
    q, kv, ps = np.asarray(case.q_lens), np.asarray(case.kv_lens), case.page_size
    window = case.window_left
    ev = [case.dtype, head_grouping(case.q_heads, case.kv_heads), logits_label(case.logit_scale),
          f"past-length-{case.past_length}", "causal" if case.causal else "non-causal"]
    ev += [label for label, on in (
        ("decode-seq", (q == 1).any()), ("prefill-seq", (q > 1).any()),
        ("mixed-prefill-decode", (q == 1).any() and (q > 1).any()),
        ("seq-without-queries", (q == 0).any()),
        ("num-active-below-batch", case.num_seqs < case.max_num_seqs),
        ("padding-q-rows", case.total_tokens < case.max_tokens),
        ("kv-len-on-page-edge", (kv % ps == 0).any()),
        ("kv-len-mid-page", (kv % ps != 0).any()), ("multi-page-seq", (kv > ps).any()),
        ("window", window is not None),
        ("window-cuts-keys", window is not None and any(
            k - 1 - window > 0 for k in case.kv_lens)),
        ("soft-cap", case.soft_cap is not None),
        ("explicit-scale", not case.default_scale),
        ("pinned-blocks", case.blocks is not None)) if on]
    return sorted(set(ev))


def seed_cases(without: frozenset[str]) -> list[FlywheelVarlenPagedCase]:
    """Hand-made: GQA over shuffled multi-page tables, a decode step, a prefill chunk
    crossing a page edge and one from an empty cache, a sequence without queries, an
    inactive sequence and padding rows, a window cutting keys and a soft cap."""
    return [FlywheelVarlenPagedCase(
        dtype="bfloat16", seed=3, q_lens=(1, 130, 0, 5), kv_lens=(257, 300, 128, 5),
        max_num_seqs=5, max_tokens=140, q_heads=4, kv_heads=2, page_size=128, pages_per_seq=3,
        sliding_window=200, soft_cap=20.0, sm_scale=0.3,
        past_length="masked" if "nan-past-lengths" in without else "nan")]


FAMILY = Family(
    name="flywheel-tpu-varlen-paged",
    summary=library.summary("varlen attention over a paged cache (flash_attn_varlen_func "
                            "with a block table: 128-token merged pages, ragged prefill "
                            "and decode, num_active, GQA, windows, soft cap)"),
    case_type=FlywheelVarlenPagedCase,
    cases=flywheel_varlen_paged_cases,
    **_kernel.ADAPTER.fields(),
    # The op's capabilities; valid everywhere: the library specifies its padding rows (0).
    **ragged_record(lambda case: {}),
    reference=reference,
    low_precision_reference=low_precision_reference,
    output_axes={"out": ("head", "token", "dim")},
    kernels=KernelExpectation(forward=1, forward_computes=KERNEL_CORE),
    tolerances=TOLERANCES,
    events=events,
    contract=CONTRACT,
    optional=OPTIONAL,
    seed_cases=seed_cases,
    metamorphic=METAMORPHIC,
    relations=RELATIONS,
    export=export,
    modes=frozenset({"gqa", "mqa", "decode-seq", "prefill-seq", "mixed-prefill-decode",
                     "seq-without-queries", "num-active-below-batch", "padding-q-rows",
                     "kv-len-on-page-edge", "kv-len-mid-page", "multi-page-seq",
                     "window-cuts-keys", "soft-cap", "explicit-scale", "non-causal",
                     "past-length-nan", "past-length-masked", "logits-16x"}),
    requires=library.REQUIRES,
)
