"""The tpu-inference-mla-v2 family: tpu-inference 0.32.0's MLA v2 kernel (DeepSeek-style
multi-head latent attention over a paged latent cache, the new tokens' latents written by
the same call), judged against the ragged paged attention op (MQA over [latent | rope]
keys with the latent as value) and an exact cache update."""

from __future__ import annotations

import numpy as np

from kernel_harness.core.case import dtype_packing
from kernel_harness.families.tpu_inference import ragged
from kernel_harness.families.tpu_inference.loader import TESTED_VERSION
from kernel_harness.families.tpu_inference.record import tpu_inference_family
from kernel_harness.families.tpu_inference_mla_v2 import kernel as _kernel
from kernel_harness.families.tpu_inference_mla_v2.cases import (
    BFLOAT16_RUNS,
    REFERENCE_FIELDS,
    MlaV2Case,
    mla_attention,
    mla_v2_cases,
)
from kernel_harness.families.tpu_inference_mla_v2.events import events, seed_cases
from kernel_harness.families.tpu_inference_mla_v2.export import export
from kernel_harness.ops.paged_attention.ragged import CAPABILITIES
from kernel_harness.ops.paged_attention.ragged_record import exclusion, passes_record
from kernel_harness.ops.paged_attention.semantics import SEMANTICS

_CACHE = ("a copy: the new latents bit for bit (padding lanes zero), every other slot "
          "unchanged; the judge's bound cannot be 0, and 1e-7 of the cache's scale is under "
          "one rounding of any drawn value")
TOLERANCES = ragged.cache_update_tolerances(
    float32=(1e-4, "float32 inputs, logits (s_dtype float32), probabilities and "
             "accumulator (interpret on CPU: exact float32 dots); worst observed "
             "1.7e-6 over 10 random interpret cases (jax 0.12.0.1); a kernel "
             "rounding its float32 operands to bfloat16 errs ~4e-3"),
    bfloat16=(3e-2, "the logits are bfloat16 (s_dtype, the kernel's default), "
              "the probabilities bfloat16 where p_same_dtype_as_v, the output "
              "normalized by an approximate reciprocal and rounded to bfloat16; "
              "worst observed 9.6e-3 over 21 random interpret cases (jax "
              "0.12.0.1): the limit is 3.1x that"),
    cache="cache_kv", copy=_CACHE)

CONTRACT = f"""\
tpu-inference {TESTED_VERSION} mla_ragged_paged_attention (MLA v2), forward only; install:
{_kernel.NEEDS} (its transpose module imports sympy).
{SEMANTICS}\
- MLA: the cache holds one latent token per slot: slot s of a page is
  row s // packing, column s % packing (packing 1 for float32, 2 for bfloat16), its lanes
  [latent (lkv_dim) | zero padding to 128 | rope key (r_dim) | zero padding].
- The new tokens are new_kv_c and new_k_pe (written with zero padding lanes); logits of
  head h = sm_scale * (ql_nope[h] . latent + q_pe[:, h] . rope), then the op's cap and
  mask; values are the latents. out is [q_heads, max_tokens, lkv_dim]. The returned cache
  is compared EXACTLY, every slot but one kind: in bfloat16 (two tokens per packed row)
  the kernel stores whole rows, so when a sequence's last token (kv_len - 1) is the first
  of its row, the slot after it (past kv_len, read by nothing until a later step writes
  it) gets a copy of that token (seen on jax 0.12.0.1); those slots are excluded. A slot
  before a sequence's first new token in the same row is kept (checked).
- The logits' dtype s_dtype is the input dtype (float32 cases: float32; the kernel's
  default bfloat16 is what bfloat16 cases use); p_same_dtype_as_v and
  two_step_flash_attention are drawn. For bfloat16 the kernel normalizes its output with
  pltpu.reciprocal, which jax 0.10.2 lacks (AttributeError): there only float32 is drawn.
- Not covered yet: q/k/v scales and fp8 caches, transpose_kv_cache, decode_batch_size,
  the default mask_value.
"""


def packed_row_slots(case: MlaV2Case) -> dict[str, np.ndarray]:
    """The cache slot sharing a packed row with a sequence's last token, when it lies past
    kv_len, is outside the contract (bfloat16: the kernel stores whole packed rows and
    leaves its new token there too; nothing reads a slot past kv_len)."""
    pack = dtype_packing(case.dtype)
    if pack == 1:
        return {}
    slots = np.zeros(case.cache_shape()[:3] + (1,), bool)
    for kv_len, (pages, _) in zip(case.kv_lens, case.slots_by_sequence(), strict=True):
        if kv_len % pack:
            last = kv_len - 1
            slot = last % case.page_size
            slots[pages[last], slot // pack, slot % pack + 1:] = True
    return {"cache_kv": slots} if slots.any() else {}


def reference(case: MlaV2Case, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """:func:`~.cases.mla_attention` on the case's page table and
    :data:`~.cases.REFERENCE_FIELDS`."""
    return mla_attention(inputs, case.page_table(),
                         **{f: getattr(case, f) for f in REFERENCE_FIELDS})


FAMILY = tpu_inference_family(
    name="tpu-inference-mla-v2",
    summary="MLA v2 (multi-head latent attention over a paged latent cache, updated in the "
    "same call; mixed prefill and decode)",
    needs="tpu-inference and sympy",
    adapter=_kernel.ADAPTER,
    case_type=MlaV2Case,
    cases=mla_v2_cases,
    requires=f"tpu-inference and sympy: {_kernel.NEEDS}",
    reference=reference,
    output_axes={"out": ("head", "token", "dim"),
                 "cache_kv": ("page", "row", "pack", "lane")},
    tolerances=TOLERANCES,
    events=events,
    contract=CONTRACT,
    seed_cases=seed_cases,
    export=export,
    metamorphic=ragged.lowering_hooks("ql_nope", _kernel.traceable),
    # out is [q_heads, tokens, lkv_dim]; one latent KV is shared by every query head.
    **passes_record(
        excluded=exclusion(token_axis=1, kernel=packed_row_slots),
        capabilities=CAPABILITIES - {"gqa"},
        modes={"mixed-q-split", "one-step-flash", "p-in-s-dtype", "rope-padded",
               "odd-heads"} | ({"bfloat16"} if BFLOAT16_RUNS else set())),
)
