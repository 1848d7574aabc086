"""The tpu-ragged-paged family: ``jax.experimental.pallas.ops.tpu.ragged_paged_attention``."""

from __future__ import annotations

import numpy as np

from kernel_harness.core.tolerance import (
    FLOAT32_FLOOR,
    LOW_PRECISION_FLOOR,
    Tolerance,
    ToleranceTable,
)
from kernel_harness.families.tpu_ragged_paged import kernel as _kernel
from kernel_harness.families.tpu_ragged_paged.cases import (
    OPTIONAL,
    RaggedCase,
    ragged_cases,
    ragged_seed_cases,
)
from kernel_harness.families.tpu_ragged_paged.export import export
from kernel_harness.families.tpu_ragged_paged.metamorphic import EXCLUDED, METAMORPHIC, RELATIONS
from kernel_harness.ops.attention.reference import KERNEL_CORE
from kernel_harness.ops.paged_attention.ragged import ragged_attention
from kernel_harness.ops.paged_attention.ragged_record import ragged_record
from kernel_harness.ops.paged_attention.semantics import RAGGED
from kernel_harness.ops.paged_attention.sequences import page_slots
from kernel_harness.ops.paged_attention.strategy import head_grouping
from kernel_harness.records.family import Family
from kernel_harness.records.kernels import KernelExpectation

TOLERANCES = ToleranceTable(
    {
        ("float32", "out"): Tolerance(max_rel_err=1e-4, slice_floor=FLOAT32_FLOOR, reason=(
            "float32 q, K, V, float32 logits and online softmax (interpret on CPU: exact "
            "f32 dots); worst observed 8.4e-7 (jax 0.10.2) and 1.3e-6 (jax 0.12.0.1, with "
            "q_len 0 and NaN-poisoned cases) over 60 random interpret cases each; a kernel "
            "rounding its float32 operands to bfloat16 errs ~4e-3, 40x over this limit")),
        ("bfloat16", "out"): Tolerance(max_rel_err=6e-3, slice_floor=LOW_PRECISION_FLOOR, reason=(
            "bfloat16 q, K, V are exact in the float32 logits and the probabilities stay "
            "float32 (the f32 x bf16 dot promotes), so the error is the bfloat16 rounding of "
            "the stored output: at most 2^-8 = 3.9e-3 of an element; worst observed 3.2e-3 "
            "over 60 random interpret cases on each of jax 0.10.2 and 0.12.0.1; limit 1.5x "
            "the rounding bound")),
    }
)

CONTRACT = f"""\
TPU ragged paged attention (jax.experimental.pallas.ops.tpu.ragged_paged_attention,
forward only), from the kernel source. The ragged paged attention op
(kernel_harness/ops/paged_attention/semantics.py), n = num_seqs:
{RAGGED}\
- Its layout: page_indices is [max_num_seqs, pages_per_seq]; kv_pages interleaves heads:
  combined head 2h is K of kv head h, 2h+1 its V. The mask is an additive mask_value
  (-0.7 * float32 max).
- Padding rows are never stored by a sequence: the kernel copies its accumulator scratch
  there (stale values of earlier query blocks, or uninitialized scratch), which the op
  excludes. The harness fills the slots past num_seqs with junk lengths and valid pages,
  and page-table entries past a sequence's last page with valid pages, so a kernel
  reading them shows.
- Cache slots no active sequence owns may hold anything, NaN included: the kernel zeroes
  K and V past kv_len before its dots ("we should mask out the NaNs"), so NaN in the
  tail of a last page, in pages of padding slots or in unused pages must not reach out.
  Drawn (poison=True: those slots are NaN) and checked.
- q_len > kv_len is invalid (dynamic_validate_inputs raises; the kernel itself does not
  check): never drawn. q_len 0 sequences (cached keys, no queries this step) are valid
  here and drawn.
- KERNEL FINDING, not drawn: a sequence with kv_len 0 (q_len 0; dynamic_validate_inputs
  accepts it) inside num_seqs corrupts the NEXT sequence's output. Its kv loop runs no
  block, so the K/V block the previous sequence prefetched for it is never waited on and
  the double-buffer index is not flipped; the next sequence then reads that buffer (the
  empty sequence's pages) as its own first block. Seen on jax 0.10.2: q_lens (0, 3),
  kv_lens (0, 7) -> sequence 1 wrong by 2.8 (NaN with poisoned unowned slots); (1, 0, 3) /
  (1, 0, 7) likewise; an empty sequence last, or followed only by q_len 0 ones, is
  harmless. Replay: tests/families/tpu_ragged_paged/test_tpu_ragged_paged_findings.py.
- bfloat16: logits and probabilities in float32, output rounded to the input dtype.
- Interpreting it needs two extensions of jax's TPU interpreter (jax 0.10.2 and
  0.12.0.1): reads through ref.reshape/ref.bitcast (the interpreter assumes only index
  transforms) and masked stores to 3-D refs (the interpreter's in-bounds check indexes
  axis 0 for every axis and rejects valid stores): kernel_harness/core/compat/interpreter_ext.py.
  Without them the kernel does not run under interpret mode at all.
- tpu-interpret finding (not waived): load_with_init is jnp.where(kv_blk_idx == 0, init,
  ref[...]), so a sequence's first kv block reads the never-written m, l and acc scratch
  and discards it; the TPU interpreter reports uninitialized reads at
  ragged_paged_attention/kernel.py:498 (load_with_init), 3 per kernel at grid point
  (0, 0). Benign by design as far as the source shows; until a reviewer waives it,
  `check --backend tpu-interpret` fails on it.
- Not covered: k_scale/v_scale and quantized (int8/fp8) K/V, mask_value other than the
  default, the tuned block sizes (num_kv_pages_per_block/num_queries_per_block left None:
  the tuned table asks for the TPU generation), more than 4 kv heads (one head block
  only: num_heads_blks > 1 is never reached), kv_len 0 sequences (the finding above).
"""


def events(case: RaggedCase) -> list[str]:
    """What the case reaches: decode/prefill mixes, padding, block spans, GQA, window, cap."""
    decode = sum(1 for q in case.q_lens if q == 1)
    prefill = sum(1 for q in case.q_lens if q > 1)
    block_kv = case.kv_pages_per_block * case.page_size
    q_lens = np.asarray(case.q_lens)
    ends = np.cumsum(q_lens)[q_lens > 0]
    starts = ends - q_lens[q_lens > 0]
    qb = case.queries_per_block
    window = case.sliding_window
    ev = [case.dtype, head_grouping(case.q_heads, case.kv_heads)]
    ev += [label for label, on in (
        ("decode-seq", decode), ("prefill-seq", prefill),
        ("mixed-prefill-decode", decode and prefill), ("seq-without-queries", 0 in case.q_lens),
        ("multi-seq", case.num_seqs > 1), ("num-seqs-below-max", case.num_seqs < case.max_num_seqs),
        ("padding-q-rows", case.total_tokens < case.max_tokens),
        ("kv-len-mid-page", any(kv % case.page_size for kv in case.kv_lens)),
        ("prefill-from-empty-cache", any(kv < q_len + 1 for q_len, kv in zip(
            case.q_lens, case.kv_lens, strict=True) if q_len > 1)),
        ("multi-kv-block", any(kv > block_kv for kv in case.kv_lens)),
        ("seq-spans-q-blocks", any(s // qb != (e - 1) // qb
                                   for s, e in zip(starts, ends, strict=True))),
        ("seq-ends-at-q-block-end", any(e % qb == 0 for e in ends[:-1])),
        ("q-block-shared-by-seqs", any(np.bincount(starts // qb) > 1)),
        ("sliding-window", window is not None),
        ("window-cuts-keys", window is not None and any(kv > window for kv in case.kv_lens)),
        ("soft-cap", case.soft_cap is not None), ("large-logits", case.logit_scale > 1),
        ("nan-in-unowned-cache-slots", case.poison)) if on]
    return sorted(set(ev))



def sequence_kv(case: RaggedCase, kv_pages: np.ndarray, table_row: np.ndarray, kv_len: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """float32 K and V [kv_len, kv_heads, head_dim] of one sequence, its tokens walked
    through its ``table_row`` by the op (:func:`~kernel_harness.ops.paged_attention.
    sequences.page_slots`); K in combined head 2h, V 2h+1."""
    tokens = kv_pages[page_slots(table_row, kv_len, case.page_size)].astype(np.float32)
    return tokens[:, 0::2], tokens[:, 1::2]


def reference(case: RaggedCase, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """out [max_tokens, q_heads, head_dim] float32 from the (dtype-rounded) inputs: the
    ragged paged attention op over each sequence's pages (:func:`sequence_kv`)."""
    pages, table = np.asarray(inputs["kv_pages"]), np.asarray(inputs["page_indices"])
    kv = (sequence_kv(case, pages, table[i], n) for i, n in enumerate(case.kv_lens))
    return {"out": ragged_attention(inputs["q"], kv, case.q_lens, case.kv_lens,
                                    sm_scale=case.sm_scale, soft_cap=case.soft_cap,
                                    window=case.sliding_window)}

FAMILY = Family(
    name="tpu-ragged-paged",
    summary="TPU Pallas ragged paged attention (mixed prefill and decode over a paged KV "
    "cache; TPU interpret mode on CPU, extended by kernel_harness.core.compat.interpreter_ext)",
    case_type=RaggedCase,
    cases=ragged_cases,
    **_kernel.ADAPTER.fields(),
    kernels=KernelExpectation(forward=1, forward_computes=KERNEL_CORE),
    reference=reference,
    output_axes={"out": ("token", "head", "dim")},
    tolerances=TOLERANCES,
    **ragged_record(EXCLUDED),
    events=events,
    contract=CONTRACT,
    seed_cases=ragged_seed_cases,
    metamorphic=METAMORPHIC,
    relations=RELATIONS,
    optional=OPTIONAL,
    export=export,
    modes=frozenset({
        "mixed-prefill-decode", "decode-seq", "prefill-seq", "multi-seq", "multi-kv-block",
        "sliding-window", "window-cuts-keys", "soft-cap", "gqa", "mqa", "seq-spans-q-blocks",
        "q-block-shared-by-seqs", "seq-without-queries", "prefill-from-empty-cache",
        "padding-q-rows", "num-seqs-below-max", "large-logits", "float32", "bfloat16"}),
)
