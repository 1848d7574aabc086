"""The tpu-inference-rpa-v3 family: tpu-inference 0.32.0's ragged paged attention v3 (mixed
prefill and decode over a paged KV cache, the new tokens' K/V written into the cache by
the same call), judged against the ragged paged attention op and an exact cache update."""

from __future__ import annotations

import numpy as np

from kernel_harness.families.tpu_inference import ragged
from kernel_harness.families.tpu_inference.loader import INSTALL, TESTED_VERSION
from kernel_harness.families.tpu_inference.record import tpu_inference_family
from kernel_harness.families.tpu_inference_rpa_v3 import kernel as _kernel
from kernel_harness.families.tpu_inference_rpa_v3.cases import (
    OPTIONAL,
    RpaV3Case,
    rpa_v3_cases,
)
from kernel_harness.families.tpu_inference_rpa_v3.events import events, seed_cases
from kernel_harness.families.tpu_inference_rpa_v3.export import export
from kernel_harness.ops.paged_attention.ragged_record import exclusion, kv_update_record
from kernel_harness.ops.paged_attention.semantics import QUANTIZED, SEMANTICS

_CACHE = ("a copy: the new tokens' K/V bit for bit, every other slot unchanged; the judge's "
          "bound cannot be 0, and 1e-7 of the cache's scale is under one rounding of any "
          "drawn value (a cache written in bfloat16, a token in the wrong slot or a stale "
          "slot errs 1e-3 to 1)")
TOLERANCES = ragged.cache_update_tolerances(
    float32=(1e-4, "float32 q, K, V, logits, online softmax and accumulator "
             "(interpret on CPU: exact float32 dots); worst observed 3.3e-7 "
             "over 10 random and 2 golden interpret cases (jax 0.10.2); a "
             "kernel rounding its float32 operands to bfloat16 errs ~4e-3"),
    bfloat16=(2.5e-2, "the kernel's accumulator, running max and sum are "
              "bfloat16 (out_dtype is the accumulator dtype: bfloat16 for "
              "bfloat16 q), rounded once per kv compute block, and the "
              "probabilities are cast to bfloat16 before the PV product; "
              "worst observed 1.1e-2 over 26 random interpret cases (jax "
              "0.10.2): the limit is 2.3x that; a kernel dropping a kv block "
              "errs ~1e-1"),
    cache="kv_cache", copy=_CACHE)

CONTRACT = f"""\
tpu-inference {TESTED_VERSION} ragged_paged_attention (v3), forward only; install: {INSTALL}.
{SEMANTICS}{QUANTIZED}\
- A cache token holds the K of kv head h in combined head 2h and its V in 2h+1 (combined
  heads packed `packing` per 32-bit word: 1 for float32, 2 for bfloat16, 4 for float8;
  lanes past head_dim are padding, zero as the kernel writes them).
- The slot kind this kernel may leave: with a sliding window, a new token below the window
  of its sequence's last query (position <= kv_len - 1 - window) may be left unwritten
  (KERNEL FINDING: it is, when the query block doing the update skips its kv block;
  findings/tpu-inference-rpa-v3-window-leaves-cache-unwritten); nothing reads it again.
- Each pass has its own (bq, bkv, bq_compute, bkv_compute) block sizes, drawn (compute
  blocks smaller than fetched ones included).
- The TPU generation the kernel is told (tpu_version 5, 6, 7) is part of the case: the
  adapter answers get_tpu_version() for the trace (v6+: int16 mask arithmetic for
  bfloat16; v7: explicit HBM operands). On a real TPU the case's generation is still the
  one answered: run the generation of the chip (a follow-up: pin it from the device).
- float32 in, float32 out (accumulator float32); bfloat16 in, bfloat16 accumulator.
- Interpreting it needs jax's TPU interpreter extended to loads, stores and DMAs through
  ref.reshape/ref.bitcast (kernel_harness/core/compat/interpreter_ext.py). Those
  accesses are recorded on the whole range of their leading indexers (often the whole
  buffer), so with race detection on (backend tpu-interpret) the interpreter reports races
  that are the extension's, not the kernel's: check it on interpret or a TPU.
- Not covered yet: int8 caches, mask_value, use_causal_mask=False,
  skip_kv_mask, the head-dim-64 kernel variant (kernel_hd64; head_dim 64 here is padded
  to 128 lanes by this kernel), the default (tuned) block sizes, NaN in unowned slots.
"""


def window_slots_left(case: RpaV3Case) -> dict[str, np.ndarray]:
    """With a sliding window, the cache slots of new tokens below the window of their
    sequence's last query are outside the contract (written or not: nothing reads them
    again; the finding tpu-inference-rpa-v3-window-leaves-cache-unwritten)."""
    if case.sliding_window is None:
        return {}
    slots = np.zeros((case.total_pages, case.page_size, 1, 1, 1), bool)
    for q_len, kv_len, (pages, offsets) in zip(case.q_lens, case.kv_lens,
                                               case.slots_by_sequence(), strict=True):
        for pos in range(kv_len - q_len, kv_len - case.sliding_window):
            slots[pages[pos], offsets[pos]] = True
    return {"kv_cache": slots} if slots.any() else {}


FAMILY = tpu_inference_family(
    name="tpu-inference-rpa-v3",
    summary="ragged paged attention v3 (mixed prefill and decode, KV cache updated in the "
    "same call; TPU v5/v6/v7 as a case dimension)",
    adapter=_kernel.ADAPTER,
    case_type=RpaV3Case,
    cases=rpa_v3_cases,
    tolerances=TOLERANCES,
    events=events,
    contract=CONTRACT,
    seed_cases=seed_cases,
    optional=OPTIONAL,
    export=export,
    # lowers-for-tpu as on a v6e; the generation the kernel is told stays the case's.
    metamorphic=ragged.lowering_hooks("q", _kernel.traceable),
    **kv_update_record(excluded=exclusion(kernel=window_slots_left), modes={
        "kv-compute-block-below-fetch", "q-compute-block-below-fetch", "gqa", "mqa",
        "head-dim-padded", "tpu-v5", "tpu-v6", "tpu-v7", "bfloat16", "fp8-kv-cache",
        "kv-scales", "q-quantized"}),
)
