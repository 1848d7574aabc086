"""The flywheel-tpu-gdn family: flywheel-tpu 0.3.0's fused conv1d + Gated DeltaNet serving
kernel (``linear_attention.fused_conv1d_gdn``) on the delta-rule op's serving form
(:mod:`kernel_harness.ops.delta_rule.serving`: conv1d pre-stage, gates, slot pools, the
op's token-serial recurrence), never against the library's own references."""

from __future__ import annotations

from typing import Any

from kernel_harness.core.tolerance import (
    SliceFloor,
    Tolerance,
    ToleranceTable,
    standard_floor,
)
from kernel_harness.families.flywheel_tpu import library
from kernel_harness.families.flywheel_tpu import linear_attention as fused
from kernel_harness.families.flywheel_tpu_gdn import kernel as _kernel
from kernel_harness.families.flywheel_tpu_gdn.export import export
from kernel_harness.ops.delta_rule.serving import (
    ServingCase,
    serving_cases,
    serving_events,
    serving_reference,
)
from kernel_harness.ops.delta_rule.serving_relations import SERVING_RELATIONS
from kernel_harness.records.family import Family
from kernel_harness.records.hooks import Metamorphic
from kernel_harness.records.kernels import KernelExpectation

#: The family's fixed shapes: every case of a configuration shares one compiled program
#: (the lengths, slots and decodes are arrays of the call), ~40 s to compile interpreted.
TOKENS, MAX_SEQS, SLOTS, CHUNK = 192, 4, 10, 64

CONTRACT = f"""\
flywheel-tpu {library.TESTED_VERSION} linear_attention.fused_conv1d_gdn(qkv, b, a,
conv_state, recurrent_state, conv_weight, conv_bias, a_log, dt_bias, query_start_loc,
state_indices, distribution, seq_lens, read_state_indices, n_kq=, n_v=, d_k=, d_v=,
kernel_size=): conv1d + silu + gated delta rule over a ragged batch, forward only (a
serving kernel). Install: {library.INSTALL} (Python >= 3.12).
- The op: kernel_harness/ops/delta_rule/serving.py says it in full (causal depthwise conv
  over the packed qkv rows with the sequence's carried conv state, silu, the split
  [q | k | v], q and k L2-normalised (eps 1e-6, q times d_k^-1/2), g = -exp(a_log)
  softplus(a + dt_bias), beta = sigmoid(b), the delta rule per value head; seq_len -
  query_len > 0 resumes from read_state_indices' slot, else zeros).
- Drawn: {TOKENS} token rows, up to {MAX_SEQS} sequences (padding entries past
  distribution[2] with slot 0, zero length), decodes first (distribution[0]), then fresh
  and continued sequences up to the whole batch (several 64-token chunks, across the
  128-row tile, misaligned starts, fewer tokens than the conv state), {SLOTS} slots (0
  the null slot, never used), read slots other than the write slots, d_k = d_v = 128,
  n_kq = 1 with n_v 1 or 2, kernel_size 4 with or without bias; qkv bfloat16, b and a
  float32, both pools float32, the conv pool holding bfloat16 values (raw inputs: what
  the kernel writes there).
- Compared: out (rows past the last sequence must be zero), both pools whole, and the
  slots no sequence writes bit for bit (untouched_bits: each element's 32 bits).
- Precision design (the library's): the chunked path feeds the MXU bfloat16 operands
  (k, q, the state S, T^-1, v_new) with float32 accumulation and keeps the carried
  conv history in a bfloat16 halo; out is bfloat16.
- Not drawn: num_spec_tokens > 0 (speculative verify windows: another decode path,
  read_offsets), the replay variant (fused_conv1d_gdn_replay), zero_initialize_out=False,
  compute_precision other than float32, tile sizes other than the defaults (decode 4,
  mixed 128, chunk 64), d_k or d_v other than 128 (the heads are lane slices), n_kq > 1,
  bfloat16 pools, conv pools holding values a bfloat16 halo cannot carry (see above),
  two sequences sharing a slot, NaN in a fresh sequence's slot.
"""

_EXACT = ("copies: the conv pool's written slots are raw bfloat16 inputs moved, the "
          "untouched slots must not change at all (1e-7 of the scale: exact)")
#: Rows of out (and of S) are sums of q.S (k.S) terms whose bfloat16 rounding follows |q||S|,
#: not the row's own size after cancellation: a row is judged by its own scale only down
#: to 1/4 of the global one.
_FLOOR = SliceFloor(1 / 4, (
    "bfloat16 MXU operands: a row's error follows |q||S| (the operands' sizes), which track "
    "the global scale, while the row's own size shrinks with cancellation (a row floored "
    "at 1/16 of it errs up to 3.1e-2 of its own, flywheel-tpu-gdn)"))


def serving_tolerances(seen: str) -> ToleranceTable:
    """The serving kernels' judges, ``seen`` saying the worst errors of the pristine
    kernel (out and state, of the scale and of a row's own)."""
    why = ("bfloat16 out and a float32 state from float32 arithmetic with bfloat16 MXU "
           "operands (the library's design: q, k, S, T^-1 and v_new rounded to bfloat16 in "
           f"the chunked path) over 128-long sums: worst seen {seen}; 4e-2 is ~2.5x the "
           "worst. A stale or misplaced state, a wrong gate or a missing tap errs O(1)")
    exact = standard_floor("bfloat16", gradient=False)
    return ToleranceTable({("bfloat16", out): Tolerance(max_rel_err=limit, reason=reason,
                                                        slice_floor=floor)
                           for out, limit, reason, floor in (
                               ("out", 4e-2, why, _FLOOR),
                               ("recurrent_state", 4e-2, why, _FLOOR),
                               ("conv_state", 1e-7, _EXACT, exact),
                               ("untouched_bits", 1e-7, _EXACT, exact))})


TOLERANCES = serving_tolerances(
    "out 1.6e-2 of the scale (a one-token sequence whose q.k cancels), 1.6e-2 of a row's "
    "own; the state 7.6e-3 and 1.4e-2 (25 drawn cases, interpret, jax 0.12.0.1, "
    "2026-12-06)")


def cases(*, without: frozenset[str] = frozenset()) -> Any:
    """The op's serving strategy at the family's shapes."""
    return serving_cases(tokens=TOKENS, max_seqs=MAX_SEQS, slots=SLOTS, chunk_size=CHUNK)


def reference(case: ServingCase, inputs: dict[str, Any]) -> dict[str, Any]:
    """The op's serving reference, plus the untouched slots' bits of its pools."""
    ref = serving_reference(case, inputs)
    ref["untouched_bits"] = fused.untouched_bits(case, ref["conv_state"],
                                                  ref["recurrent_state"])
    return ref


def seed_cases(without: frozenset[str]) -> list[ServingCase]:
    """Hand-made: two decodes (one reading another slot) beside a 149-token sequence
    starting off the 8-row grid and crossing the 128-row tile (three chunks, the last
    partial) and a 3-token continued one shorter than the conv state; grouped heads."""
    return [ServingCase(
        dtype="bfloat16", seed=5, tokens=TOKENS, max_seqs=MAX_SEQS, slots=SLOTS,
        value_heads=2, chunk_size=CHUNK, lengths=(1, 1, 149, 2), histories=(9, 3, 0, 5),
        num_decode=2, write_slots=(3, 7, 1, 6), read_slots=(3, 8, 1, 2), decay="weak")]


FAMILY = Family(
    name="flywheel-tpu-gdn",
    summary=library.summary("fused conv1d + Gated DeltaNet serving kernel "
                            "(linear_attention.fused_conv1d_gdn: ragged prefill and decode, "
                            "conv and recurrent states in slot pools; forward only)"),
    case_type=ServingCase,
    cases=cases,
    **_kernel.ADAPTER.fields(),
    reference=reference,
    output_axes={"out": ("token", "dim"), "conv_state": ("slot", "tap", "dim"),
                 "recurrent_state": ("slot", "head", "key", "dim"),
                 "untouched_bits": ("half", "dim")},
    tolerances=TOLERANCES,
    capabilities=frozenset(),
    events=lambda case: [*serving_events(case), f"heads:{case.key_heads}/{case.value_heads}"],
    contract=CONTRACT,
    seed_cases=seed_cases,
    metamorphic=Metamorphic(roles={}, logit_input="qkv", traceable=_kernel.traceable,
                            tpu_device_kind=fused.DEVICE_KIND),
    export=export,
    relations=SERVING_RELATIONS,
    requires=library.REQUIRES,
    # The decode segment's kernel (BATCHED) and the prefill/mixed one (PER_SEQ).
    kernels=KernelExpectation(forward=2),
    modes=frozenset({
        "decode-row", "prefill-row", "continued-prefill", "decode-beside-prefill",
        "multi-chunk-sequence", "partial-last-chunk", "shorter-than-conv-state",
        "misaligned-start", "read-slot-differs", "unused-slots", "padding-rows",
        "grouped-heads", "conv-bias", "decay:weak"}),
)
