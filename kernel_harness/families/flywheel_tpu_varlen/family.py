"""The flywheel-tpu-varlen family: flywheel-tpu's ``flash_attn_varlen_func`` (forward and
lse) on the attention problem, its batch rows packed as sequences, with its precision
design declared (``flash``)."""

from __future__ import annotations

from kernel_harness.core.tolerance import (
    SliceFloor,
    Tolerance,
    ToleranceTable,
    standard_floor,
)
from kernel_harness.families.flywheel_tpu import library
from kernel_harness.families.flywheel_tpu_varlen import kernel as _kernel
from kernel_harness.families.flywheel_tpu_varlen.cases import (
    FlywheelVarlenCase,
    block_events,
    blocks,
    seed_cases,
)
from kernel_harness.families.flywheel_tpu_varlen.export import export
from kernel_harness.ops.attention.record import problem_record
from kernel_harness.ops.attention.reference import KERNEL_CORE
from kernel_harness.ops.attention.tolerance import ATTENTION_CALIBRATED
from kernel_harness.records.family import Family
from kernel_harness.records.kernels import KernelExpectation

CONTRACT = f"""\
flywheel-tpu {library.TESTED_VERSION}'s flash_attn_varlen_func (flash-attn's varlen API on
TPU), forward only (its vjp raises NotImplementedError), bfloat16 in and out, lse float32.
- Packing: batch row b is sequence b (q_lengths[b] queries, kv_lengths[b] keys; the whole
  row without them), head-major, in row order; the padding tokens go to the buffer's tail
  past cu_seqlens[-1]: their out is 0 and lse -inf, and no query sees those keys.
- Causal and window (left, right) are aligned bottom-right per sequence: query i of
  sequence b sits at key position i + kv_lengths[b] - q_lengths[b]. A row that sees no
  key (more queries than keys under causal or a window) is unspecified by the library
  (it returns finite values there): outside the contract.
- GQA: query head h reads kv head h // (heads / kv_heads); softmax_scale None is
  1/sqrt(head_dim); lse in natural log.
- block_sizes: drawn from the library's legal set (or its own choice), so
  block-size-invariance compares two tilings of one packing.
- Precision design (declared, ops/attention/designs.py "flash"): q times scale*log2(e)
  rounded to bfloat16, a float32 base-2 softmax, P rounded for P.V with float32
  accumulation. Not drawn: softcap (the flash design does not model it).
"""

_REASON = ("bfloat16 in and out, FlashAttention's numerics; judged by the calibrated bound "
           "against the flash design's twin (at most 2x its error + 2^-8, docs/judge.md); the "
           "fixed limit serves checks without that yardstick")

#: The lse's error follows the logits it sums, not its own value (a row whose lse is
#: near 0 may sum logits as large as the global scale).
_LSE_FLOOR = SliceFloor(1 / 4, "lse: its error is 2^-9 of the logits a row sums, which "
                        "can be as large as the global scale while the row's lse is ~0")

TOLERANCES = ToleranceTable({
    ("bfloat16", "out"): Tolerance(max_rel_err=2e-2, reason=_REASON,
                                   calibrated=ATTENTION_CALIBRATED,
                                   slice_floor=standard_floor("bfloat16", gradient=False)),
    ("bfloat16", "lse"): Tolerance(
        max_rel_err=1.5e-2, slice_floor=_LSE_FLOOR, reason="float32 log-sum-exp of logits "
        "from q*scale*log2(e) rounded to bfloat16: each logit off by up to 2^-9 of itself; "
        "worst observed 1.6e-3 global, 0.0105 of a row at the 1/16 floor (16x logits, "
        "interpret, jax 0.12.0.1); lse in log2 units errs 0.44")})


FAMILY = Family(
    name="flywheel-tpu-varlen",
    summary=library.summary("varlen flash attention (flash_attn_varlen_func), forward and "
                            "lse, packed sequences, bfloat16, bottom-right per sequence, GQA"),
    **problem_record(FlywheelVarlenCase, blocks=blocks, config_events=block_events,
                     traceable=_kernel.traceable, tpu_device_kind="TPU v6 lite"),
    **_kernel.ADAPTER.fields(),
    tolerances=TOLERANCES,
    capabilities=frozenset({"causal", "local-window", "gqa", "mqa", "sm-scale", "q-len-ne-kv-len",
                           "ragged-lengths"}),
    kernels=KernelExpectation(forward=1, backward=0, forward_computes=KERNEL_CORE),
    contract=CONTRACT,
    seed_cases=seed_cases,
    modes=frozenset({"bfloat16", "causal", "window", "gqa", "mqa", "q-lengths",
                     "kv-lengths", "padding-rows", "explicit-scale", "logits-16x",
                     "several-sequences", "one-token-sequence", "sequence-past-128",
                     "pinned-blocks", "library-blocks"}),
    export=export,
    requires=library.REQUIRES,
)
