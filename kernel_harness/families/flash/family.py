"""The ``flash`` family: ``jax.experimental.pallas.ops.tpu.flash_attention``."""

from __future__ import annotations

import numpy as np

from kernel_harness.families.flash import kernel as _kernel
from kernel_harness.families.flash.bad_inputs import bad_inputs
from kernel_harness.families.flash.bench import BENCH
from kernel_harness.families.flash.cases import FlashCase, attention_definition, flash_events
from kernel_harness.families.flash.export import export
from kernel_harness.families.flash.metamorphic import METAMORPHIC
from kernel_harness.families.flash.strategy import (
    CALIBRATED_DTYPES,
    OPTIONAL,
    flash_cases,
    flash_seed_cases,
)
from kernel_harness.ops.attention.program import AttentionCall, references
from kernel_harness.ops.attention.reference import visibility
from kernel_harness.ops.attention.tolerance import measured_table
from kernel_harness.ops.attention.vocabulary import output_axes
from kernel_harness.spec.family import Family
from kernel_harness.spec.kernels import KernelExpectation
from kernel_harness.spec.outside import OutsideKernel

CONTRACT = """\
TPU flash attention (jax.experimental.pallas.ops.tpu.flash_attention), forward and vjp.
- Bias placement: logits = (q.k^T + ab) * sm_scale. The bias is added BEFORE scaling,
  unlike the usual q.k^T * scale + bias (jax.nn.dot_product_attention); dab = sm_scale * dS.
- Causal is top-left aligned whatever q_len and kv_len are: query i sees key j iff j <= i
  (with q_len < kv_len the last queries do NOT see the trailing keys; bottom-right
  alignment, as in decoding, is not what this kernel does).
- Segment ids: query i sees key j iff their ids are equal (any int32 values, any order;
  non-adjacent runs with the same id see each other).
- Masking adds a finite -0.7*float32.max, not -inf. A row that sees no key (possible only
  through segment ids) returns a uniform average of v over the keys of the kv blocks the
  kernel visits: block-size dependent, so OUTSIDE the contract. Such rows are excluded
  from out and dq, and the case's cotangent is zero there so they cannot leak into dk/dv.
- Shapes: heads equal for q, k, v (no GQA); kv blocks multiples of 128; head_dim <= 128 or
  a multiple of 128; backward blocks must divide their sequence; forward block_b need
  not divide batch.
- Judges: float32 by the fixed table; bfloat16 by the calibrated bound (error at most 2x
  that of the same plain-jnp math in bfloat16 at the backend's default matmul precision,
  + 2^-8, globally and per slice; README "Calibrated bounds"), so bfloat16 draws 4x/16x
  logits too.
- Not drawn: a bias together with a q block that does not divide q_len. The kernel then
  reads a bias block past the end of ab, which TPU interpret mode rejects (IndexError:
  out-of-bounds block index) where a compiled TPU pads it; untested on a TPU here.
"""


def attention_call(case: FlashCase, inputs: dict[str, np.ndarray]) -> AttentionCall:
    """The case in the attention op's vocabulary: bias added before scaling, visibility
    from the causal flag and the segment ids."""
    segments = ((inputs["segment_ids_q"], inputs["segment_ids_kv"])
                if "segment_ids_q" in inputs else None)
    return AttentionCall(
        definition=attention_definition(case),
        q=inputs["q"], k=inputs["k"], v=inputs["v"], do=inputs["do"],
        bias=inputs["ab"] if case.bias else None,
        vis=visibility(case.q_len, case.kv_len, causal=case.causal, segments=segments, xp=np),
        names={"dbias": "dab"},
        absent={} if case.bias else {"dab": (case.batch, case.q_heads, case.q_len, case.kv_len)})


reference, low_precision_reference = references(attention_call)


def valid(case: FlashCase) -> dict[str, np.ndarray]:
    """out and dq rows that see no key are outside the contract."""
    if case.q_segments is None:
        return {}
    rows = ~case.rows_without_keys()[:, None, :, None]  # (batch, 1, q_len, 1)
    return {"out": rows, "dq": rows}


TOLERANCES = measured_table(
    {
        "out": ((1e-4, "8.5e-7"), (1.5e-2, "4.4e-3")),
        "dq": ((2e-4, "9.1e-7"), (3e-2, "7.9e-3")),
        "dk": ((2e-4, "8.6e-7"), (2.5e-2, "6.2e-3")),
        "dv": ((1e-4, "5.8e-7"), (1.5e-2, "4.4e-3")),
        "dab": ((2e-4, "9.7e-7"), (4e-2, "1.04e-2")),
    },
    f32_where="end to end (interpret on CPU: exact f32 dots)",
    bf16_where="inputs/outputs, bf16 operands of the PV, dS.K and dS^T.Q products",
    calibrated_dtypes=CALIBRATED_DTYPES,
    forward=frozenset({"out"}),
)

#: The kernel's modes ci-sized draws must reach (Family.modes).
MODES = frozenset({
    "causal", "non-causal", "bias", "sm-scale", "segments", "several-segments",
    "unsorted-segments", "length-1-segment", "rows-without-keys", "fwd-single-tile",
    "fwd-multi-kv-block", "fwd-kv-subtiles", "multi-q-block", "ragged-q-block",
    "dkv-multi-block", "dkv-subtiles", "dq-multi-block", "dq-subtiles", "batch>1",
    "heads>1", "block_b>1", "block_b<batch", "q-len<kv-len", "float32", "bfloat16",
})


FAMILY = Family(
    modes=MODES,
    name="flash",
    summary="TPU Pallas flash attention (jax.experimental.pallas.ops.tpu.flash_attention), "
    "forward and vjp incl. the bias gradient; interpret backends force TPU interpret mode",
    case_type=FlashCase,
    cases=flash_cases,
    seed_cases=flash_seed_cases,
    optional=OPTIONAL,
    **_kernel.ADAPTER.fields(),
    kernels=KernelExpectation(forward=1, backward=1),
    outside_kernel=OutsideKernel(backward={
        "reduce_sum": "di = rowsum(o * do) of the output and its cotangent: the backward's "
                      "preprocessing, in XLA before the dkv and dq kernels"}),
    reference=reference,
    output_axes=output_axes("bhqd", kv_head="head", dab=("batch", "head", "query", "key")),
    tolerances=TOLERANCES,
    capabilities=frozenset(
        {"causal", "full", "segments", "bias", "sm-scale", "q-len-ne-kv-len", "gradients"}
    ),
    valid=valid,
    events=flash_events,
    contract=CONTRACT,
    metamorphic=METAMORPHIC,
    bench=BENCH,
    export=export,
    low_precision_reference=low_precision_reference,
    not_compared=lambda case: {} if case.bias else {"dab": "no bias in this case"},
    bad_inputs=bad_inputs,
)
