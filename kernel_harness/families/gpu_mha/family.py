"""The gpu-mha family: Pallas GPU (Triton) flash attention forward + fused backward."""

from __future__ import annotations

from kernel_harness.core.tolerance import ToleranceTable
from kernel_harness.families.gpu_common import tolerance_table, triton_requires
from kernel_harness.families.gpu_mha import kernel as _kernel
from kernel_harness.families.gpu_mha.bench import BENCH
from kernel_harness.families.gpu_mha.cases import MhaCase, block_events, blocks
from kernel_harness.families.gpu_mha.export import export
from kernel_harness.ops.attention.record import problem_record
from kernel_harness.ops.attention.reference import KERNEL_CORE
from kernel_harness.records.family import Family
from kernel_harness.records.kernels import KernelExpectation
from kernel_harness.records.outside import OutsideKernel

_LOW = (
    "{dtype} inputs; the kernel feeds its dots {dtype} operands by design (P cast to "
    "{dtype} before PV; dS and P cast to {dtype} in the backward) and stores outputs in "
    "{dtype}"
)


def _tolerances() -> ToleranceTable:
    # Low-precision entries: ~4-5x the worst of 80 interpret cases per dtype (worst seen:
    # bf16 out 2.9e-3 dq 9.9e-3 dk 6.0e-3 dv 3.7e-3; f16 out 4.3e-4 dq 1.1e-3 dk 8.3e-4
    # dv 4.9e-4). float32 and lse: ~1e-6 / 2e-7 seen; the bounds must still catch a
    # float32 kernel doing its PV product in bfloat16 (~3e-3).
    table = {
        "float32": {"out": 2e-4, "lse": 2e-5, "dq": 3e-4, "dk": 3e-4, "dv": 3e-4},
        "bfloat16": {"out": 1.5e-2, "lse": 2e-5, "dq": 4e-2, "dk": 3e-2, "dv": 2e-2},
        "float16": {"out": 2e-3, "lse": 2e-5, "dq": 5e-3, "dk": 4e-3, "dv": 2.5e-3},
    }
    return tolerance_table(
        table,
        low_reason=_LOW,
        lse_reason="lse is accumulated in float32 from exactly-multiplied rounded inputs",
        gradients=frozenset({"dq", "dk", "dv"}),
    )


CONTRACT = """\
Triton flash attention mha(q, k, v, segment_ids) on [batch, len, heads, head_dim].
- Masks: causal is top-left aligned (query i sees keys j <= i). Segment ids are ONE
  int32 [batch, kv_len] array used for queries and keys, so segments need q_len ==
  kv_len; ids compare by equality (unsorted and repeated ids are fine); ids are >= 0
  (the attention op's vocabulary: a negative id, such as a -1 for padding, is never drawn
  and nothing is said of it).
- No fully masked rows are reachable: with segments each query sees itself, causal
  needs q_len <= kv_len so key 0 is always visible. Every element is compared.
- Not drawn (kernel limits, each checked by the case): causal with q_len > kv_len
  (the causal loop bound runs past the last key block: NaN in interpret mode);
  effective blocks must be powers of two >= 16 dividing their length (forward raises
  ValueError; the backward does NOT check and silently returns wrong dq/dk/dv);
  q_len/block_q_dq must equal kv_len/block_kv_dkv (backward raises ValueError).
- lse is the kernel's residual: log2 of the softmax denominator of the sm_scaled logits.
- head_dim need not be a power of two (the kernel pads to one and masks).
"""

#: The kernel's modes ci-sized draws must reach (Family.modes).
MODES = frozenset({
    "causal", "non-causal", "segments", "several-segments", "unsorted-segments",
    "repeated-segment-id", "length-1-segment", "multi-q-block", "multi-kv-block",
    "multi-bwd-block", "bwd-blocks-differ", "block-clamped", "q-len<kv-len", "q-len>kv-len",
    "non-pow2-length", "head-dim-padded", "explicit-scale", "float32",
    "bfloat16", "float16",
})


FAMILY = Family(
    modes=MODES,
    name="gpu-mha",
    summary="Pallas GPU (Triton) flash attention mha: forward, lse residual, fused backward",
    **problem_record(MhaCase, blocks=blocks, config_events=block_events),
    **_kernel.ADAPTER.fields(),
    # No backend on a jax without the op (jax >= 0.12.1): list and check say why.
    requires=triton_requires(_kernel.OPS),
    # The residuals call's out (return_residuals=True: out and lse) is judged as out.
    same_as={"out_residuals": "out"},
    # The real backward runs two kernels (the delta preprocessing, then dq/dk/dv).
    kernels=KernelExpectation(forward=1, backward=2, forward_computes=KERNEL_CORE,
                              backward_computes=KERNEL_CORE),
    outside_kernel=OutsideKernel(layout_only=(
        "jax's mha wrapper passes q, k, v, the scale and the segment ids to its kernels; "
        "the backward's preprocessing is a kernel too")),
    tolerances=_tolerances(),
    capabilities=frozenset(
        {"causal", "full", "segments", "sm-scale", "q-len-ne-kv-len", "residuals", "gradients"}
    ),
    contract=CONTRACT,
    bench=BENCH,
    export=export,
    claimed=_kernel.CLAIM,
)
