"""The tpu-inference-fused-moe family: tpu-inference 0.32.0's fused expert-parallel MoE
(``fused_moe.v1``: gating scored and top-k routed inside the kernel, tokens sent to the
devices of their experts by remote DMAs, each expert's gated FFN, the results sent back and
combined) on 2..8 simulated devices, under both DMA schedules, against the MoE op."""

from __future__ import annotations

from kernel_harness.core.tolerance import ToleranceTable
from kernel_harness.families.tpu_inference.loader import INSTALL, TESTED_VERSION
from kernel_harness.families.tpu_inference.record import tpu_inference_family
from kernel_harness.families.tpu_inference_fused_moe import kernel as _kernel
from kernel_harness.families.tpu_inference_fused_moe.export import export
from kernel_harness.ops.mesh import MAX_DEVICES
from kernel_harness.ops.moe.cases import MoeCase, moe_cases, moe_events
from kernel_harness.ops.moe.reference import KERNEL_CORE, reference

TOLERANCES = ToleranceTable.of_limits({
    ("float32", "out"): (2e-5, "float32 throughout (scores, both projections, the "
                         "activation, the combine): a few 2^-24 roundings per term of sums "
                         "over hidden <= 512 (4.5e-7 seen on the goldens); a kernel rounding "
                         "tokens or weights to bfloat16 errs ~4e-3"),
    ("bfloat16", "out"): (3e-2, "bfloat16 scores (the softmax or sigmoid in the input "
                          "dtype: 2^-9 relative), each expert's output stored in bfloat16 "
                          "and summed over intermediate blocks in bfloat16 (one 2^-9 "
                          "rounding per block), the combine in float32 rounded once more: "
                          "a few 2^-9 of a token's scale (5.6e-3 seen on the bfloat16 "
                          "golden)"),
})

CONTRACT = f"""\
tpu-inference {TESTED_VERSION} fused_ep_moe(mesh, tokens, w1, w2, gating_output, top_k,
renormalize_topk_logits=..., act_fn=..., scoring_fn=..., b1=..., b2=..., bt=..., bf=...,
bd1=..., bd2=..., btc=..., bfc=..., bd1c=..., bd2c=..., ep_axis_name="x"); install:
{INSTALL}.
- out[t] = sum over the top_k experts e of token t (by score) of score[t, e] *
  (act(x W1[e, 0] + b1[e, 0], x W1[e, 1] + b1[e, 1]) W2[e] + b2[e]); score = softmax over
  experts or sigmoid of the gating logits (renormalized over the top k when asked);
  act(g, u) = silu(g) u, gelu_tanh(g) u, or swigluoai (clip g <= 7, u to [-7, 7],
  (u + 1) g sigmoid(1.702 g)). The reference is the MoE op (kernel_harness/ops/moe),
  not the package's ref_moe.
- Routing ties are outside the contract: the case's gating logits of a token are distinct
  multiples of 1/4 (scores distinct in bfloat16 too).
- The mesh is (1, devices), axes ("data", "x"), experts and tokens sharded over "x" (the
  kernel takes a 2-D mesh whose other axis has size 1 and is named "data": it asks for
  axis_index("data") itself). Every device's rows of out are
  compared (the whole array).
- Blocks are the case's (bd used for both bd1 and bd2, bd_compute for bd1c and bd2c):
  the kernel's tuned table is not consulted. With tokens_per_device <= 8 x packing the
  kernel takes bt = bt_compute = tokens_per_device itself; cases then say so.
- Interpreted with reads of zero rows at a buffer's end allowed (out_of_bounds_reads=
  "uninitialized"): the kernel issues zero-length DMAs at the end of its buffers, which
  jax's interpreter rejects as out-of-bounds reads; a read reaching real data past the end
  still reads NaN (uninitialized memory is NaN-filled on every backend here). It also needs
  jax's TPU interpreter extended to refs accessed through ref.bitcast/ref.reshape
  (kernel_harness/core/compat/interpreter_ext.py): with race detection on (backend
  tpu-interpret) the interpreter reports races that are the extension's or zero-length
  copies', not the kernel's: check it on interpret or a TPU.
- dma_mode is the TPU interpreter's DMA schedule; a result that depends on it is a bug.
  Cases use 2..8 devices (at most 4 on jax < 0.11).
- Not covered yet: quantized weights (subc_quant_w1_sz/w2_sz and their scales), the
  tuned default blocks, float8 tokens, routing ties.
"""


def seed_cases(without: frozenset[str]) -> list[MoeCase]:
    """Hand-made: two devices, one block of everything; three devices, two experts each,
    top 3, two token and intermediate blocks with smaller compute blocks; four devices,
    bfloat16, sigmoid scoring renormalized, biases, GPT-OSS's activation."""
    base = dict(hidden=256, intermediate=128, bf=128, bf_compute=128)
    return [
        MoeCase(dtype="float32", seed=1, devices=2, tokens_per_device=8,
                experts_per_device=1, top_k=1, bt=8, bt_compute=8, bd=256, bd_compute=256,
                **base),
        MoeCase(dtype="float32", seed=2, devices=3, tokens_per_device=16, hidden=256,
                intermediate=256, experts_per_device=2, top_k=3, bt=8, bt_compute=8,
                bf=128, bf_compute=128, bd=256, bd_compute=128, activation="gelu"),
        MoeCase(dtype="bfloat16", seed=3, devices=4, tokens_per_device=16,
                experts_per_device=1, top_k=2, scoring="sigmoid", renormalize=True,
                bias=True, activation="swigluoai", bt=16, bt_compute=16, bd=256,
                bd_compute=256, dma_mode="eager", **base),
    ]


FAMILY = tpu_inference_family(
    computes=KERNEL_CORE,
    name=_kernel.NAME,
    summary="fused expert-parallel MoE (a collective: tokens routed to their experts' "
    "devices by remote DMAs)",
    adapter=_kernel.ADAPTER,
    case_type=MoeCase,
    cases=moe_cases,
    reference=reference,
    output_axes={"out": ("row", "dim")},
    tolerances=TOLERANCES,
    events=moe_events,
    contract=CONTRACT,
    seed_cases=seed_cases,
    export=export,
    devices=MAX_DEVICES,
    modes=frozenset({"devices=2", "forwarded-slots", "dma:on_wait", "dma:eager", "float32",
                     "bfloat16", "top-k=1", "top-k>1", "multi-token-block", "token-blocks>=3",
                     "multi-intermediate-block", "multi-hidden-block",
                     "hidden-compute<block", "several-experts-per-device", "renormalized",
                     "bias", "scoring:sigmoid", "activation:swigluoai"}),
)
