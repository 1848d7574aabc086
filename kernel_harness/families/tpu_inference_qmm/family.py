"""The tpu-inference-quantized-matmul family: tpu-inference 0.32.0's quantized matmul
(``quantized_matmul_kernel``, per-channel int8 or float8_e4m3fn weights, activations quantized
per row to the same dtype on the fly, or not), judged against the op's exact reference with
the kernel's quantization of the activations declared as its contract (truncation toward
zero; docs/findings.md says what rounding to nearest would change)."""

from __future__ import annotations

from kernel_harness.core.tolerance import ToleranceTable
from kernel_harness.families.tpu_inference import matmul
from kernel_harness.families.tpu_inference.loader import INSTALL, TESTED_VERSION
from kernel_harness.families.tpu_inference.record import tpu_inference_family
from kernel_harness.families.tpu_inference_qmm import kernel as _kernel
from kernel_harness.families.tpu_inference_qmm.export import export
from kernel_harness.ops.quantized_matmul.cases import W_Q_DTYPES, QmmCase, qmm_cases
from kernel_harness.ops.quantized_matmul.reference import KERNEL_CORE
from kernel_harness.records.blocks import block_variants
from kernel_harness.records.hooks import Metamorphic
from kernel_harness.records.outside import OutsideKernel

_INT8 = ("with quantized activations the products are exact (int32 sums for int8; float8 "
         "products summed in float32, exact for n_in <= 768), then two float32 scalings "
         "(x's row scale, w's channel scale)")
TOLERANCES = ToleranceTable.of_limits({
    ("float32", "out"): (1e-5, f"{_INT8}, or float32 products summed over n_in <= 768 in "
                         "float32 (a few 2^-24 roundings per row); a kernel that rounds x "
                         "to nearest instead of truncating errs ~1e-2, one that keeps "
                         "bfloat16 products ~4e-3"),
    ("bfloat16", "out"): (8e-3, f"{_INT8}, or bfloat16 x times int8 w summed in float32, then "
                          "stored in bfloat16: one 2^-9 rounding, and for unquantized x the "
                          "float32 sum"),
})

CONTRACT = f"""\
tpu-inference {TESTED_VERSION} quantized_matmul_kernel(x, w_q, w_scale, x_q_dtype=...,
tuned_value=TunedValue(batch_block, out_block, in_block)); install: {INSTALL}.
- out[b, o] = sum_i x_q[b, i] * w_q[o, i] * x_scale[b] * w_scale[o], where with
  x_q_dtype set (the weights' dtype: int8 or float8_e4m3fn, the pairs of the kernel's
  tuned table) each row of x is quantized on the fly: x_scale = max|x_row| / QMAX (127;
  448), x_q = x * (1 / x_scale) converted by astype: for int8 that is TRUNCATION toward
  zero (the package's own test reference rounds to nearest: a difference of up to one
  quantization step per element, which the judge sees), for float8 the format's rounding
  to nearest even; without it x_q = x and x_scale = 1. Each row of x is drawn with
  max|x| = QMAX * 2^-5, so its scale is a power of two and the quantized values are exact
  in any arithmetic (with other scales a value landing a last bit under an integer
  truncates one step lower, on the row's largest element in particular: arithmetic noise
  a judge cannot tell from a contract change). Not drawn: float8 x with int8 weights (not
  in the tuned table; the kernel then takes an int32 dot and truncates x's fractions).
- w_q and w_scale are made by the harness from float weights (per output channel, scale
  max|w| / QMAX, rounding to nearest), never by the package's quantize helpers.
- The TPU generation is not a case dimension: these kernels ask it (get_tpu_version) only
  for the VMEM limit they request (get_device_vmem_limit; on a CPU the package's default
  96 MiB, which it logs), and the tiling is the case's, not the tuned table's.
- The tiling is the case's (the kernel pads every dimension to its block); the package's
  tuned tables are not used. Every element of out is compared, each row against its own
  largest value too.
"""


#: Features a kernel may lack (``--without``).
OPTIONAL: dict[str, str] = {"fp8": "int8 weights only"}


def cases(*, without: frozenset[str] = frozenset()):  # noqa: ANN201 (a strategy)
    """The op's strategy with per-channel weights, float8 ones unless ``without`` fp8."""
    return qmm_cases(w_q_dtypes=("int8",) if "fp8" in without else W_Q_DTYPES)


def seed_cases(without: frozenset[str]) -> list[QmmCase]:
    """Hand-made: quantized x reused across two out-blocks (one in-block), an int32
    accumulator over three in-blocks with every dimension padded, two batch blocks of
    128 rows (the second padded), and float8 weights and activations over two padded
    in-blocks."""
    fp8 = [] if "fp8" in without else [
        QmmCase(dtype="bfloat16", seed=4, n_batch=16, n_in=200, n_out=300, batch_block=16,
                out_block=256, in_block=128, x_q_dtype="float8_e4m3fn",
                w_q_dtype="float8_e4m3fn")]
    return [
        QmmCase(dtype="float32", seed=1, n_batch=8, n_in=128, n_out=256, batch_block=8,
                out_block=128, in_block=128),
        QmmCase(dtype="bfloat16", seed=2, n_batch=20, n_in=300, n_out=200, batch_block=32,
                out_block=128, in_block=128),
        QmmCase(dtype="float32", seed=3, n_batch=130, n_in=256, n_out=128, batch_block=128,
                out_block=128, in_block=128),
    ] + fp8


FAMILY = tpu_inference_family(
    computes=KERNEL_CORE,
    name="tpu-inference-quantized-matmul",
    summary="quantized matmul (per-channel int8/fp8 weights, activations quantized per row)",
    adapter=_kernel.ADAPTER,
    **matmul.record_fields("toward-zero"),
    cases=cases,
    optional=OPTIONAL,
    tolerances=TOLERANCES,
    contract=CONTRACT,
    seed_cases=seed_cases,
    export=export,
    outside_kernel=OutsideKernel(forward={
        "reduce_max": "each row's abs max of x, to quantize the activations: a kernel block "
                      "sees only part of a row, so the wrapper computes it before the kernel",
    }),
    # No queries and keys: deterministic, finite-out (x scaled), block-size-invariance (any
    # other tiling of the same problem) and lowers-for-tpu (Mosaic lowering of the tiling).
    metamorphic=Metamorphic(
        roles={}, logit_input="x", traceable=_kernel.traceable,
        block_variants=block_variants({"batch_block": (8, 16, 32, 128),
                                       "out_block": (128, 256), "in_block": (128, 256)})),
    modes=frozenset({
        "x_q:int8", "x_q:float8_e4m3fn", "x_q:none", "w_q:int8", "w_q:float8_e4m3fn",
        "accumulate-over-in-blocks",
        "quantized-x-reused-across-out-blocks", "x-quantized-per-in-block", "padded-batch",
        "padded-out", "padded-in", "multi-batch-block", "float32", "bfloat16"}),
)
