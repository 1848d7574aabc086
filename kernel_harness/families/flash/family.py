"""The ``flash`` family: ``jax.experimental.pallas.ops.tpu.flash_attention``."""

from __future__ import annotations

from kernel_harness.families.flash import kernel as _kernel
from kernel_harness.families.flash.bad_inputs import bad_inputs
from kernel_harness.families.flash.bench import BENCH
from kernel_harness.families.flash.blocks import block_events, blocks
from kernel_harness.families.flash.cases import FlashCase
from kernel_harness.families.flash.export import export
from kernel_harness.ops.attention.record import problem_record
from kernel_harness.ops.attention.reference import KERNEL_CORE
from kernel_harness.ops.attention.tolerance import measured_table
from kernel_harness.records.family import Family
from kernel_harness.records.kernels import KernelExpectation
from kernel_harness.records.outside import OutsideKernel

CONTRACT = """\
TPU flash attention (jax.experimental.pallas.ops.tpu.flash_attention), forward and vjp.
- Bias placement: logits = (q.k^T + ab) * sm_scale. The bias is added BEFORE scaling,
  unlike the usual q.k^T * scale + bias (jax.nn.dot_product_attention); dab = sm_scale * dS.
  sm_scale is the case's scale (1/sqrt(head_dim) where the case gives none).
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
  that of the same jnp math in bfloat16 at the backend's default matmul precision, rounded
  where this kernel rounds: the jax-flash precision design, P rounded normalised when
  block_k == kv_len, else block_k keys at a time as the online softmax runs, D =
  rowsum(dO * O) from the rounded output, dab = sm_scale * dS rounded once; + 2^-8,
  globally and per slice; README "Calibrated bounds"), so bfloat16 draws 4x/16x logits
  too.
- Not drawn: a bias together with a q block that does not divide q_len. The kernel then
  reads a bias block past the end of ab, which TPU interpret mode rejects (IndexError:
  out-of-bounds block index) where a compiled TPU pads it; untested on a TPU here.
"""

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
    calibrated_dtypes=FlashCase.FEATURES.calibrated,
    forward=frozenset({"out"}),
)

#: The kernel's modes ci-sized draws must reach (Family.modes).
MODES = frozenset({
    "causal", "non-causal", "bias-full", "explicit-scale", "segments", "several-segments",
    "unsorted-segments", "length-1-segment", "rows-without-keys", "fwd-single-tile",
    "fwd-multi-kv-block", "fwd-kv-subtiles", "multi-q-block", "ragged-q-block",
    "dkv-multi-block", "dkv-subtiles", "dq-multi-block", "dq-subtiles", "batch>1",
    "heads>1", "block_b>1", "block_b<batch", "q-len<kv-len", "float32", "bfloat16",
})


def flash_seed_cases(without: frozenset[str] = frozenset()) -> tuple[FlashCase, ...]:
    """The case every flash matches-reference run tries first: the tiled forward (kv grid
    and sub-tiles) with batch 3 in blocks of 2, so the last batch block is partial, and
    causal, bias and segments (one row with length-1 segments and ids out of order) on
    unless ``without`` names them. A 30-example derandomized run can miss the partial
    batch block altogether; this case cannot."""
    runs = (((2, 100), (0, 1), (1, 300), (2, 111)), ((0, 512),), ((3, 7), (1, 505)))
    segmented = "segments" not in without
    return (FlashCase(
        dtype="float32", seed=11, batch=3, q_heads=1, kv_heads=1, q_len=512, kv_len=512,
        head_dim=64, is_causal="causal" not in without,
        scale=None if "scale" in without else 0.0625,
        bias=None if "bias" in without else "full",
        q_segments=runs if segmented else None, kv_segments=runs if segmented else None,
        block_b=2, block_q=128, block_k_major=256, block_k=128,
        block_q_major_dkv=256, block_k_major_dkv=256, block_k_dkv=128, block_q_dkv=128,
        block_k_major_dq=256, block_k_dq=128, block_q_dq=128,
    ),)


FAMILY = Family(
    modes=MODES,
    name="flash",
    summary="TPU Pallas flash attention (jax.experimental.pallas.ops.tpu.flash_attention), "
    "forward and vjp incl. the bias gradient; interpret backends force TPU interpret mode",
    **problem_record(FlashCase, blocks=blocks, config_events=block_events,
                     traceable=_kernel.traceable),
    seed_cases=flash_seed_cases,
    **_kernel.ADAPTER.fields(),
    # The dkv and dq kernels.
    kernels=KernelExpectation(forward=1, backward=2, forward_computes=KERNEL_CORE,
                              backward_computes=KERNEL_CORE),
    outside_kernel=OutsideKernel(backward={
        "reduce_sum": "di = rowsum(o * do) of the output and its cotangent: the backward's "
                      "preprocessing, in XLA before the dkv and dq kernels"}),
    tolerances=TOLERANCES,
    capabilities=frozenset(
        {"causal", "full", "segments", "bias", "sm-scale", "q-len-ne-kv-len", "gradients"}
    ),
    contract=CONTRACT,
    bench=BENCH,
    export=export,
    bad_inputs=bad_inputs,
)
