"""The ``hstu`` family: HSTU pointwise attention checked against a plain-jnp reference."""

from __future__ import annotations

import math

import numpy as np

from kernel_harness.core.tolerance import ToleranceTable
from kernel_harness.families.hstu import kernel as _kernel
from kernel_harness.families.hstu.bad_inputs import bad_inputs
from kernel_harness.families.hstu.bench import BENCH
from kernel_harness.families.hstu.export import export
from kernel_harness.families.hstu.metamorphic import METAMORPHIC
from kernel_harness.ops.attention.events import length_events
from kernel_harness.ops.attention.vocabulary import output_axes
from kernel_harness.ops.pointwise_attention import cases
from kernel_harness.ops.pointwise_attention.masks import case_mask
from kernel_harness.ops.pointwise_attention.reference import KERNEL_CORE, pointwise_outputs
from kernel_harness.records.family import Family
from kernel_harness.records.kernels import KernelExpectation
from kernel_harness.records.outside import OutsideKernel

OUTPUTS = ("out", "dq", "dk", "dv")

_F32 = (1e-4, "f32 dots at HIGHEST: worst 7e-7 in 50 cases (interpret); bf16 PV operands ~1e-3")
_BF16 = (2e-2, "bf16 inputs, bf16 MXU operands (p, ds), bf16 outputs: worst 5.6e-3 in 70 cases")

TOLERANCES = ToleranceTable.of_limits(
    {(d, o): limit for d, limit in (("float32", _F32), ("bfloat16", _BF16)) for o in OUTPUTS},
    gradients=frozenset(OUTPUTS) - {"out"})


def _block_fractions(mask: np.ndarray, bq: int, bkv: int) -> np.ndarray:
    """Per (batch, q block, kv block): the fraction of entries the mask keeps."""
    b, lq, lk = mask.shape
    return mask.reshape(b, lq // bq, bq, lk // bkv, bkv).mean(axis=(2, 4))


def events(case: cases.HstuCase) -> list[str]:
    """Coverage labels: block structure, mask kinds, window edges, segment layouts."""
    blocks = cases.resolved_blocks(case)
    labels = [case.dtype, f"mask:{case.mask}", *length_events(case.q_len, case.kv_len)]
    if case.mask == "numpy":
        labels += ["numpy-mask", f"numpy-pattern:{case.mask_pattern}"]
    fwd = (blocks["block_q"], blocks["block_kv"], blocks["block_kv_compute"])
    bwd = (blocks["block_q_dkv"], blocks["block_kv_dkv"], blocks["block_kv_dkv_compute"])
    labels += [label for label, on in (
        ("multi-q-block", case.q_len // blocks["block_q"] > 1),
        ("multi-kv-block", case.kv_len // blocks["block_kv"] > 1),
        ("kv-compute-split", blocks["block_kv_compute"] < blocks["block_kv"]),
        ("bwd-multi-q-block", case.q_len // blocks["block_q_dkv"] > 1),
        ("bwd-multi-kv-block", case.kv_len // blocks["block_kv_dkv"] > 1),
        ("bwd-kv-compute-split", blocks["block_kv_dkv_compute"] < blocks["block_kv_dkv"]),
        ("bwd-blocks-differ", fwd != bwd),
        ("multi-batch", case.batch > 1), ("multi-head", case.q_heads > 1),
        ("sm-scale", case.scale is not None)) if on]
    if case.window is not None:
        labels.append("window")
        if case.window == 0:
            labels.append("window-0")
        if case.window >= max(case.q_len, case.kv_len) - 1:
            labels.append("window-covers-all")
        if min(abs(case.window - blocks["block_q"]), abs(case.window - blocks["block_kv"])) <= 1:
            labels.append("window-at-block-edge")
    if case.q_segments is not None:
        labels.append("segments")
        runs = case.q_segments + case.kv_segments
        if any(n == 1 for _, n in runs):
            labels.append("length-1-segment")
        ids = [i for i, _ in case.q_segments]
        if ids != sorted(ids):
            labels.append("unsorted-segments")
        if case.q_segments != case.kv_segments:
            labels.append("q-kv-segments-differ")
    numpy_mask = cases.numpy_mask(case) if case.mask == "numpy" else None
    static = case_mask(case, {"mask": numpy_mask})
    dense = static
    if case.q_segments is not None:
        dense = case_mask(case, {
            "mask": numpy_mask,
            "q_segment_ids": cases.expand_runs(case.q_segments, case.batch),
            "kv_segment_ids": cases.expand_runs(case.kv_segments, case.batch),
        })
    fractions = _block_fractions(static, blocks["block_q"], blocks["block_kv"])
    if (fractions == 0).any():
        labels.append("empty-blocks")
    if ((fractions > 0) & (fractions < 1)).any():
        labels.append("partial-blocks")
    if (~dense.any(axis=2)).any():
        labels.append("rows-without-keys")
    return labels


CONTRACT = """\
out = (M * silu(scale * q k^T) / q_len) v per batch and head; scale defaults to 1/sqrt(head_dim).
M = base AND window AND segments. base: "causal" keeps key j <= query i with both indices from 0
(top-left aligned, also when q_len != kv_len: queries past kv_len see every key, keys past
q_len are never seen), "full", or the numpy bool mask [q_len, kv_len]. window w keeps
|i - j| <= w (inclusive, same indices). segments keep q_segment_ids == kv_segment_ids.
Masked entries contribute exactly 0 (no softmax normalisation): a query row that sees no key
outputs exactly 0 and its dq is 0; these rows are compared like any other (no exclusions).
Default blocks are min(512, length); every block is a multiple of 128 dividing its length
(compute blocks divide the memory blocks); gradients come from the kernel's custom VJP."""

#: The kernel's modes ci-sized draws must reach (Family.modes).
MODES = frozenset({
    "mask:causal", "mask:full", "numpy-mask",
    "window", "window-at-block-edge", "window-covers-all", "segments", "unsorted-segments",
    "length-1-segment", "q-kv-segments-differ", "rows-without-keys", "multi-q-block",
    "multi-kv-block", "kv-compute-split", "bwd-multi-q-block", "bwd-multi-kv-block",
    "bwd-kv-compute-split", "bwd-blocks-differ", "empty-blocks", "partial-blocks",
    "q-len<kv-len", "q-len>kv-len", "multi-batch", "multi-head", "sm-scale", "float32",
    "bfloat16",
})



def reference(case: cases.HstuCase, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``out``, ``dq``, ``dk``, ``dv`` (float32) by the pointwise-attention op over the
    case's dense mask (:func:`.masks.case_mask`); scale 1/sqrt(head_dim) unless given."""
    scale = case.scale if case.scale is not None else 1.0 / math.sqrt(case.head_dim)
    return pointwise_outputs(inputs, case_mask(case, inputs)[:, None], scale)

FAMILY = Family(
    modes=MODES,
    name="hstu",
    summary="HSTU pointwise (SiLU, 1/q_len) attention: block-sparse Pallas TPU kernel + custom VJP",
    case_type=cases.HstuCase,
    cases=cases.hstu_cases,
    seed_cases=cases.hstu_seed_cases,
    **_kernel.ADAPTER.fields(),
    kernels=KernelExpectation(forward=1, backward=1, forward_computes=KERNEL_CORE,
                              backward_computes=KERNEL_CORE),
    outside_kernel=OutsideKernel(backward={
        "reduce_sum": "dq: the backward kernel writes one float32 dq partial per kv block, "
                      "summed in XLA (kernel_harness/kernels/hstu/backward.py)",
    }),
    reference=reference,
    output_axes=output_axes("bqhd", kv_head="head"),
    tolerances=TOLERANCES,
    capabilities=frozenset(
        {"causal", "full", "local-window", "numpy-mask", "segments", "sm-scale",
         "q-len-ne-kv-len", "gradients"}
    ),
    valid=lambda case: {},
    events=events,
    contract=CONTRACT,
    metamorphic=METAMORPHIC,
    bench=BENCH,
    export=export,
    bad_inputs=bad_inputs,
)
