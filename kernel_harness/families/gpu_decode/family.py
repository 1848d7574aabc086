"""The gpu-decode family: Pallas GPU (Triton) split-k decode attention (gqa / mqa)."""

from __future__ import annotations

import numpy as np

from kernel_harness.core.tolerance import ToleranceTable
from kernel_harness.families.gpu_common import tolerance_table
from kernel_harness.families.gpu_decode import kernel as _kernel
from kernel_harness.families.gpu_decode.bench import BENCH
from kernel_harness.families.gpu_decode.cases import DecodeCase, attention_definition, decode_cases
from kernel_harness.families.gpu_decode.export import export
from kernel_harness.families.gpu_decode.metamorphic import METAMORPHIC
from kernel_harness.ops.attention.events import logits_label
from kernel_harness.ops.attention.program import AttentionCall, float32_outputs
from kernel_harness.ops.paged_attention.strategy import OUTPUT_AXES, head_grouping
from kernel_harness.spec.family import Family
from kernel_harness.spec.kernels import KernelExpectation
from kernel_harness.spec.outside import OutsideKernel


def reference(case: DecodeCase, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """out and lse (natural log) in float32 by the attention op: one query per row, the
    denominator dividing the output (or not at all: out is then sum_j exp(s_j - m) v_j with
    m the largest visible logit); a row with no visible key gives out 0 and lse -inf."""
    call = AttentionCall(definition=attention_definition(case), q=inputs["q"][:, None],
                         k=inputs["k"], v=inputs["v"], vis=case.visible()[:, None, None, :])
    res = float32_outputs(call)
    return {"out": res["out"][:, 0], "lse": res["lse"][:, :, 0]}


def _tolerances() -> ToleranceTable:
    low_reason = (
        "{dtype} inputs; the kernel casts P to {dtype} for the PV dot, stores each split's "
        "partial output in {dtype}, rescales and sums the splits in {dtype} and divides by "
        "l rounded to {dtype} (the result comes back as float32)"
    )
    # Low precision: ~4x the worst of 80 interpret cases (bf16 4.6e-3, f16 8.5e-4);
    # lse ~1e-7 seen for every dtype.
    table = {
        "float32": {"out": 2e-4, "lse": 2e-5},
        "bfloat16": {"out": 2e-2, "lse": 2e-5},
        "float16": {"out": 3.5e-3, "lse": 2e-5},
    }
    return tolerance_table(
        table,
        low_reason=low_reason,
        lse_reason="l and m are float32 in the kernel; only the inputs are rounded",
    )


def _events(case: DecodeCase) -> list[str]:
    ev = [case.dtype, f"scale-{case.scale_mode}", f"entry-{case.entry}",
          logits_label(case.logit_scale)]
    ev.append(head_grouping(case.q_heads, case.kv_heads))
    block = min(case.block_k, case.split_len)
    ev += [label for label, on in (
        ("head-splits", case.group > case.block_h), ("head-padding", case.group % case.block_h),
        ("multi-split", case.k_splits > 1), ("multi-k-block", case.split_len > block),
        ("block-k-clamped", case.block_k > case.split_len)) if on]
    for name in ("start", "end"):
        value = getattr(case, name)
        if value is not None:
            ev.append(f"{name}-{'scalar' if isinstance(value, int) else 'per-row'}")
    if not case.normalize_output:
        ev.append("unnormalized")
    vis = case.visible()
    counts = vis.sum(axis=1)
    if (counts == 0).any():
        ev.append("rows-without-keys")
    if (counts == 1).any():
        ev.append("one-key-row")
    if ((counts > 0) & (counts < case.kv_len)).any():
        ev.append("partial-row")
    per_split = vis.reshape(case.batch, case.k_splits, case.split_len).any(axis=2)
    if (per_split.any(axis=1) & ~per_split.all(axis=1)).any():
        ev.append("split-skipped")
    per_block = vis.reshape(case.batch, -1, block).any(axis=2)
    if case.split_len > block and (~per_block).any() and (counts > 0).any():
        ev.append("block-fully-masked")
    return sorted(set(ev))


CONTRACT = """\
Triton split-k decode attention: one query token per row, q [batch, q_heads, head_dim]
against k/v [batch, kv_len, kv_heads, head_dim]; q head h reads kv head h // group
(gqa); `mqa` is called on the single kv head.
- Visible keys of row b: start_idx[b] <= j < kv_seq_len[b] (kv_seq_len is an END index,
  not a count from start); a missing bound means 0 / kv_len; a scalar broadcasts.
- A row with no visible key returns out = 0 (the kernel divides 0 by l + eps) and
  lse = -inf; this is checked, not excluded.
- lse = m + log(l) from the kernel's residuals (natural log). With
  normalize_output=False, out = sum_j exp(s_j - m) v_j where m is the row's largest
  visible logit (the kernel's own m, which is mathematically determined).
- Kernel limits (checked by the case): kv_len must split into k_splits power-of-two
  parts of >= 16 keys (kernel asserts); block_h, block_k, head_dim powers of two >= 16
  (Triton tiles; interpret mode would accept smaller). No gradients (the kernel has no
  backward).
"""

FAMILY = Family(
    name="gpu-decode",
    summary="Pallas GPU (Triton) split-k decode attention gqa/mqa with start/end bounds",
    case_type=DecodeCase,
    cases=decode_cases,
    **_kernel.ADAPTER.fields(),
    kernels=KernelExpectation(forward=1),
    outside_kernel=OutsideKernel(forward=dict.fromkeys(
        ("reduce_max", "exp", "reduce_sum", "div"),
        "the k_splits partial results (each split's max, sum and output) combined in XLA "
        "after the kernel (decode_attn_unbatched): flash-decoding's combine step")),
    reference=reference,
    output_axes={**OUTPUT_AXES, "lse": ("batch", "head")},
    # The contract: a row with no key has lse = -inf, compared by position (a kernel NaN
    # or finite value there is an infinite error).
    nonfinite_reference_ok=frozenset({"lse"}),
    tolerances=_tolerances(),
    capabilities=frozenset(
        {"decode", "gqa", "mqa", "ragged-lengths", "sm-scale", "residuals", "full"}
    ),
    events=_events,
    contract=CONTRACT,
    bench=BENCH,
    metamorphic=METAMORPHIC,
    export=export,
    modes=frozenset({
        "multi-split", "split-skipped", "block-fully-masked", "multi-k-block",
        "rows-without-keys",
        "one-key-row", "partial-row", "start-per-row", "end-per-row", "unnormalized", "gqa",
        "mqa", "entry-mqa", "head-splits", "block-k-clamped", "scale-prescaled-q", "float32",
        "bfloat16", "float16"}),
)
