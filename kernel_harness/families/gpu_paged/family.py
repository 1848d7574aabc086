"""The gpu-paged family: Pallas GPU (Triton) paged attention over block tables."""

from __future__ import annotations

import dataclasses

import numpy as np

from kernel_harness.core.tolerance import ToleranceTable
from kernel_harness.families.gpu_common import F32_REASON, triton_requires
from kernel_harness.families.gpu_paged import kernel as _kernel
from kernel_harness.families.gpu_paged.bench import BENCH
from kernel_harness.families.gpu_paged.cases import PagedCase, paged_cases
from kernel_harness.families.gpu_paged.export import export
from kernel_harness.families.gpu_paged.metamorphic import METAMORPHIC, RELATIONS, excluded
from kernel_harness.ops.attention.events import logits_label
from kernel_harness.ops.attention.reference import KERNEL_CORE
from kernel_harness.ops.paged_attention.events import paged_events
from kernel_harness.ops.paged_attention.record import paged_record
from kernel_harness.ops.paged_attention.reference import PagedCall, visible_lengths
from kernel_harness.records.family import Family
from kernel_harness.records.kernels import KernelExpectation
from kernel_harness.records.outside import OutsideKernel

_TOLERANCES = ToleranceTable.of_limits({
    ("float32", "out"): (2e-4, F32_REASON),
    # Low precision: ~4x the worst interpret error seen over 94 cases (80 earlier: bf16
    # 7.7e-3, f16 1.3e-3; 14 more each on 2026-12-01: 6.1e-3, 9.7e-4). A calibrated bound
    # (2x plain low-precision math) was tried on 2026-12-01 and failed the pristine
    # kernel in CI (ratio 3.6 on a bf16 split-KV case): fixed tables until re-derived.
    ("bfloat16", "out"): (3e-2, "bfloat16 inputs; the kernel casts P to bfloat16 for the PV dot "
                          "(not with int8 pages), stores each split's partial output in "
                          "bfloat16 and rescales, sums and normalizes the splits in bfloat16; "
                          "~4x the worst seen"),
    ("float16", "out"): (5e-3, "float16 inputs; P cast to float16 for the PV dot, split "
                         "partials stored and combined in float16; ~4x the worst seen"),
})


def _events(case: PagedCase) -> list[str]:
    lengths = None if case.lengths is None else case.lengths
    ev = paged_events(case, dtype=case.dtype, lengths=lengths,
                      read_pages=[case.read_pages(b) for b in range(case.batch)])
    ev.append(logits_label(case.logit_scale))
    ev += [label for label, on in (
        ("head-padding", case.group % case.block_h), ("head-splits", case.group > case.block_h),
        ("multi-split", case.k_splits > 1),
        ("multi-compute-block", case.pages_per_partition > case.compute_pages),
        ("pages-per-compute-block>1", case.compute_pages > 1),
        ("compute-block-clamped", case.pages_per_compute_block > case.compute_pages),
        ("shared-pages", case.shared_pages), ("int8-pages", case.quantized)) if on]
    return sorted(set(ev))


CONTRACT = """\
Triton paged attention for one decode token per row: q [batch, q_heads, head_dim]
against pages [kv_heads, total_pages, page_size, head_dim] gathered through block_tables
[batch, pages_per_seq]; q head h reads kv head h // group. There is no sm_scale: the
logits are q.k, so the harness pre-scales q by 1/sqrt(head_dim).
- Row b sees tokens t < lengths[b] (token t lives in page block_tables[b, t // page_size]
  at slot t % page_size); without lengths every listed token counts.
- A row with length 0 returns out = 0 (checked), EXCEPT in float16, where it is excluded:
  the kernel divides 0 by (l + eps).astype(float16) with eps = float32 eps (1.2e-7), a
  float16 subnormal; CPU XLA flushes it to zero, so interpret mode returns NaN there
  (on GPU it depends on denormal handling). Kernel finding, not harness noise.
- Memory contract, from the kernel's loop structure: it reads whole compute blocks
  (pages_per_compute_block pages, clamped to the partition) up to the page holding a
  row's last token, and multiplies the masked slots' V by a zero weight, so those slots
  must hold FINITE data: the harness puts K = 0 and V = +-1e3 there (any leak of a masked
  slot shows as a large error). Table entries after that and spare pages are never read:
  they hold NaN (NaN scales for int8 pages), so reading one shows as NaN.
- Soft cap: logits = cap * tanh(q.k / cap) before masking. int8 pages: K = k_int8 *
  k_scale, V = v_int8 * v_scale per token (scales float32).
- Kernel limits (checked by the case): block_h a multiple of 16 (kernel raises),
  pages_per_seq a multiple of k_splits and the partition a multiple of the compute block
  (kernel asserts), compute block >= 16 keys and powers of two (Triton tiles).
  No gradients (the kernel has no backward).
"""


def paged_call(case: PagedCase, inputs: dict[str, np.ndarray]) -> PagedCall:
    """The case in the paged-decode op's vocabulary: token t of row b counts iff t <
    length_b; int8 pages dequantized with their per-token scales."""
    k = np.asarray(inputs["k_pages"], np.float32)
    v = np.asarray(inputs["v_pages"], np.float32)
    if case.quantized:
        k = k * inputs["k_scales_pages"][..., None]
        v = v * inputs["v_scales_pages"][..., None]
    mask = visible_lengths([case.length(b) for b in range(case.batch)], case.capacity)
    return PagedCall(q=inputs["q"], k_pages=k, v_pages=v, table=inputs["block_tables"],
                     mask=mask, soft_cap=case.soft_cap)


FAMILY = Family(
    name="gpu-paged",
    summary="Pallas GPU (Triton) paged attention: block tables, lengths, GQA, soft cap, int8",
    case_type=PagedCase,
    cases=paged_cases,
    **_kernel.ADAPTER.fields(),
    # No backend on a jax without the op (jax >= 0.12.1): list and check say why.
    requires=triton_requires(_kernel.OPS),
    # The op's: reference, low_precision_reference, output_axes, capabilities, valid.
    **paged_record(paged_call, excluded),
    kernels=KernelExpectation(forward=1, forward_computes=KERNEL_CORE),
    outside_kernel=OutsideKernel(forward=dict.fromkeys(
        ("reduce_max", "exp", "reduce_sum", "div"),
        "the k_splits partial results (each split's max, sum and output) combined in XLA "
        "after the kernel (paged_attention_unbatched): flash-decoding's combine step")),
    tolerances=_TOLERANCES,
    events=_events,
    contract=CONTRACT,
    bench=BENCH,
    metamorphic=METAMORPHIC,
    relations=RELATIONS,
    export=export,
    modes=frozenset({
        "int8-pages", "multi-split", "head-splits", "multi-compute-block",
        "compute-block-clamped", "partial-page", "rows-without-keys", "full-row", "shared-pages",
        "soft-cap", "gqa", "mqa", "float32", "bfloat16", "float16", "logits-16x"}),
    # float16 excludes an empty row from the comparison (CONTRACT): its case shows nothing.
    nondegenerate={"rows-without-keys": ("a row with tokens besides it, not float16",
                                         lambda c: c.lengths is not None and any(c.lengths)
                                         and c.dtype != "float16")},
    # A row filling every page is drawn in about one case of forty.
    mode_cases={"full-row": lambda: paged_cases().map(lambda c: dataclasses.replace(
        c, lengths=(c.capacity, *(c.lengths or (c.capacity,) * c.batch)[1:])))},
)
