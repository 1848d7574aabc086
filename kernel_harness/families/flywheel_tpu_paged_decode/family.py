"""The flywheel-tpu-paged-decode family: flywheel-tpu's ``flash_attn_with_kvcache`` as a
paged single-token decode (block table, ``cache_seqlens``, no append) on the paged
attention op, its q rounding (the library's precision design) modelled in the op's call."""

from __future__ import annotations

import numpy as np

from kernel_harness.core.tolerance import Tolerance, ToleranceTable, standard_floor
from kernel_harness.families.flywheel_tpu import library, merged_cache
from kernel_harness.families.flywheel_tpu_paged_decode import kernel as _kernel
from kernel_harness.families.flywheel_tpu_paged_decode.cases import (
    OPTIONAL,
    FlywheelDecodeCase,
    flywheel_decode_cases,
)
from kernel_harness.families.flywheel_tpu_paged_decode.export import export
from kernel_harness.families.flywheel_tpu_paged_decode.metamorphic import (
    METAMORPHIC,
    RELATIONS,
)
from kernel_harness.ops.attention.events import logits_label
from kernel_harness.ops.attention.reference import KERNEL_CORE
from kernel_harness.ops.attention.tolerance import ATTENTION_CALIBRATED
from kernel_harness.ops.paged_attention.events import paged_events
from kernel_harness.ops.paged_attention.record import paged_record
from kernel_harness.ops.paged_attention.reference import PagedCall
from kernel_harness.records.family import Family
from kernel_harness.records.kernels import KernelExpectation

FINDING = "findings/flywheel-tpu-decode-nan-past-cache-seqlens"

CONTRACT = f"""\
flywheel-tpu {library.TESTED_VERSION}'s flash_attn_with_kvcache(q, kv_cache, None,
cache_seqlens=, block_table=, softmax_scale=, window_size=(left, -1), softcap=) with one
query token per row and no new tokens: the paged single-token decode. Install:
{library.INSTALL} (Python >= 3.12).
- The op (paged decode): row b's query sees its tokens t < cache_seqlens[b]; token t is
  slot t % 128 of page block_table[b, t // 128] of the merged cache [pages, 128,
  2 * kv_heads, head_dim] (K of kv head h in row 2h, V in 2h + 1); query head h reads kv
  head h // (q_heads // kv_heads). A row with length 0 returns 0.
- The library's conventions: bfloat16 only; 128-token pages; windows aligned bottom-right
  (the query sits at position length - 1 and sees t >= length - 1 - left); softcap
  caps the scaled logits as softcap * tanh(s / softcap).
- Precision design (the library's): q times softmax_scale * log2(e) (softmax_scale /
  softcap with a cap) rounded to bfloat16 in flash_attn_interface.py, before the kernel;
  in the kernel float32 logits and base-2 softmax, P rounded to bfloat16 for P.V, the
  running accumulator stored in bfloat16 between kv tiles, a bfloat16 output. The op's
  call gets q as that rounded product divided back (so the float32 reference rounds q
  exactly as the kernel); the calibrated judge's yardstick rounds q, K, V and P to
  bfloat16.
- The slots past each row's length (and spare pages) hold K = 0, V = +-1e3 (a leak shows)
  or, with the optional feature nan-past-lengths, NaN in K and V (memory never written).
  Known bug ({FINDING}/): NaN in V there turns every output NaN; the project's
  known-bugs entry leaves nan-past-lengths out, and every verdict says so.
- Not covered: the append (k, v), num_active, the contiguous K/V pair, return_softmax_lse,
  page sizes above 128, multi-token calls (the varlen kernel's).
"""

_REASON = ("bfloat16 in and out, q rounded to bfloat16 after its fused scale (modelled in "
           "the reference), P rounded for P.V and the running accumulator kept in bfloat16 "
           "between kv tiles (the library's design); judged by the calibrated bound against "
           "the op's bfloat16 twin (at most 2x its error + 2^-8); the fixed limit serves "
           "checks without that yardstick")

TOLERANCES = ToleranceTable({("bfloat16", "out"): Tolerance(
    max_rel_err=2e-2, reason=_REASON, calibrated=ATTENTION_CALIBRATED,
    slice_floor=standard_floor("bfloat16", gradient=False))})


def paged_call(case: FlywheelDecodeCase, inputs: dict[str, np.ndarray]) -> PagedCall:
    """The case in the op's vocabulary: K/V split from the merged cache (exact, bfloat16),
    the visible tokens (lengths and window) and q as the library computes with it:
    bf16(q * fused) * (scale / fused), fused = scale * log2(e) (scale / cap with a cap)."""
    k, v = merged_cache.split(inputs["kv_cache"])
    return PagedCall(q=merged_cache.rounded_q(inputs["q"], case.softmax_scale, case.soft_cap),
                     k_pages=k, v_pages=v, table=inputs["block_table"],
                     mask=case.visible(), soft_cap=case.soft_cap)


def excluded(case: FlywheelDecodeCase) -> dict[str, np.ndarray]:
    """Nothing: every row's output is in the contract (length 0 included)."""
    return {}


def events(case: FlywheelDecodeCase) -> list[str]:
    """The op's events, the logit scale, then window, scale and what lies past lengths."""
    ev = paged_events(case, dtype=case.dtype, lengths=case.lengths,
                      read_pages=[-(-n // case.page_size) for n in case.lengths])
    ev.append(logits_label(case.logit_scale))
    ev.append(f"past-length-{case.past_length}")
    if case.window_left is not None:
        ev.append("window-cuts-row" if any(n - 1 - case.window_left > 0 for n in case.lengths)
                  else "window")
    if case.scale is not None:
        ev.append("explicit-scale")
    return sorted(set(ev))


def seed_cases(without: frozenset[str]) -> list[FlywheelDecodeCase]:
    """Hand-made: GQA over three shuffled pages with a row ending one past a page edge, an
    empty row and a full one, a soft cap and a window cutting the long row."""
    return [FlywheelDecodeCase(dtype="bfloat16", seed=3, batch=3, q_heads=4, kv_heads=2,
                               head_dim=128, page_size=128, pages_per_seq=3,
                               lengths=(129, 0, 384), soft_cap=30.0, window_left=200)]


FAMILY = Family(
    name="flywheel-tpu-paged-decode",
    summary=library.summary("paged single-token decode (flash_attn_with_kvcache with a "
                            "block table: 128-token merged pages, cache_seqlens, GQA, "
                            "soft cap, left windows)"),
    case_type=FlywheelDecodeCase,
    cases=flywheel_decode_cases,
    **_kernel.ADAPTER.fields(),
    # The op's: reference, low_precision_reference, output_axes, capabilities, valid.
    **paged_record(paged_call, excluded),
    kernels=KernelExpectation(forward=1, forward_computes=KERNEL_CORE),
    tolerances=TOLERANCES,
    events=events,
    contract=CONTRACT,
    optional=OPTIONAL,
    seed_cases=seed_cases,
    metamorphic=METAMORPHIC,
    relations=RELATIONS,
    export=export,
    modes=frozenset({"gqa", "mqa", "soft-cap", "partial-page", "rows-without-keys",
                     "full-row", "window-cuts-row", "explicit-scale", "past-length-nan",
                     "past-length-masked", "logits-16x"}),
    requires=library.REQUIRES,
)
