"""The tpu-inference-rpa-v3-hd64 family: tpu-inference 0.32.0's ragged paged attention v3
variant for head_dim 64 (K and V of a head side by side in one 128-lane cache row,
attention sinks, mixed prefill and decode, the new tokens written into the cache by the
same call), judged against the ragged paged attention op and an exact cache update."""

from __future__ import annotations

from kernel_harness.families.tpu_inference import ragged
from kernel_harness.families.tpu_inference.loader import INSTALL, TESTED_VERSION
from kernel_harness.families.tpu_inference.record import REQUIRES, tpu_inference_family
from kernel_harness.families.tpu_inference_rpa_hd64 import kernel as _kernel
from kernel_harness.families.tpu_inference_rpa_hd64.cases import (
    OPTIONAL,
    RpaHd64Case,
    rpa_hd64_cases,
)
from kernel_harness.families.tpu_inference_rpa_hd64.events import events, seed_cases
from kernel_harness.families.tpu_inference_rpa_hd64.export import export
from kernel_harness.ops.paged_attention.ragged import CAPABILITIES
from kernel_harness.ops.paged_attention.ragged_record import kv_update_record
from kernel_harness.ops.paged_attention.semantics import QUANTIZED, SEMANTICS

_CACHE = ("a copy: the new tokens' K/V bit for bit, every other slot (and the padding "
          "heads' rows) unchanged; 1e-7 of the cache's scale is under one rounding of any "
          "drawn value (a token in the wrong slot, K and V halves swapped or a stale slot "
          "errs 1e-3 to 1)")
TOLERANCES = ragged.cache_update_tolerances(
    float32=(1e-4, "float32 q, K, V, logits, online softmax and accumulator "
             "(interpret on CPU: exact float32 dots); worst observed 6.7e-7 "
             "over 27 random interpret cases (jax 0.12.0.1); a kernel rounding "
             "its float32 operands to bfloat16 errs ~4e-3"),
    bfloat16=(1.5e-2, "bfloat16 accumulator, running max and sum, the "
              "probabilities cast to bfloat16 before the PV product (as in the "
              "main v3 kernel); worst observed 5.0e-3 over 33 random interpret "
              "cases (jax 0.12.0.1), the limit 3x that; a kernel dropping a kv "
              "block errs ~1e-1"),
    cache="kv_cache", copy=_CACHE)

CONTRACT = f"""\
tpu-inference {TESTED_VERSION} ragged_paged_attention_hd64 (v3, head_dim 64), forward only;
install: {INSTALL}; needs jax >= 0.11 (pltpu.reciprocal; on jax 0.10.2 the family has
no backend and says so).
{SEMANTICS}{QUANTIZED}\
- head_dim is 64 and a cache row holds kv head h's K in lanes 0-63
  and its V in lanes 64-127 (rows packed `packing` per 32-bit word: 1 for float32, 2 for
  bfloat16, 4 for float8; a row past kv_heads in the last word is padding: drawn with
  data, never read; in a new token's slot the kernel writes it zero, as the whole packed
  word is written, elsewhere it stays).
- attention_sink (float32 [q_heads], drawn in half the cases): one extra logit per query
  head, not scaled, capped or masked, that takes softmax weight and has no value (the
  attention op's sinks). NOT DRAWN: sinks with bfloat16 queries and an odd number of
  query heads per kv head (the kernel pads q's head groups to the packing but not the
  sinks: a reshape error, or an out-of-bounds read of the sinks; KERNEL FINDING
  findings/tpu-inference-rpa-hd64-sinks-bf16-odd-head-groups).
- One pair of block sizes for every pass (num_kv_pages_per_block, num_queries_per_block),
  drawn; the kernel does not ask the TPU generation (the main v3 kernel does).
- Interpreted inside the harness's TPU interpreter extensions (reshaped refs): check on
  interpret or a TPU (tpu-interpret's race detection reports the extension's accesses).
"""


FAMILY = tpu_inference_family(
    name="tpu-inference-rpa-v3-hd64",
    summary="ragged paged attention v3 for head_dim 64 (K|V in one cache row, attention "
    "sinks, KV cache updated in the same call)",
    needs="tpu-inference and jax >= 0.11",
    adapter=_kernel.ADAPTER,
    case_type=RpaHd64Case,
    cases=rpa_hd64_cases,
    requires=f"{REQUIRES}; {_kernel.NEEDS_JAX}",
    tolerances=TOLERANCES,
    events=events,
    contract=CONTRACT,
    seed_cases=seed_cases,
    optional=OPTIONAL,
    export=export,
    metamorphic=ragged.lowering_hooks("q", _kernel.traceable),
    **kv_update_record(capabilities=CAPABILITIES | {"sinks"}, modes={
        "multi-q-block", "gqa", "mqa", "padding-kv-head", "attention-sinks", "bfloat16",
        "fp8-kv-cache", "kv-scales", "q-quantized"}),
)
