"""families/tpu_inference/matmul.py: the call, program and record pieces the two quantized
matmul families share."""

from __future__ import annotations

import types

from kernel_harness.families.tpu_inference import matmul
from kernel_harness.ops.quantized_matmul.cases import QmmCase


def test_tiled_call_passes_the_case_tiling_as_the_kernels_tuned_value() -> None:
    seen = {}
    tuned = types.SimpleNamespace(TunedValue=lambda *blocks: ("tuned", *blocks))

    def kernel(x, w_q, w_scale, *, tuned_value, **options):  # noqa: ANN001, ANN202
        seen.update(args=(x, w_q, w_scale), tuned_value=tuned_value, options=options)
        return "out"

    modules = {"tuned_block_sizes": tuned,
               "kernel": types.SimpleNamespace(quantized_matmul_kernel=kernel)}
    out = matmul.tiled_call(modules, "kernel", 1, 2, 3, batch_block=8, out_block=128,
                            in_block=256, x_q_dtype=None)
    assert out == "out" and seen["args"] == (1, 2, 3)
    assert seen["tuned_value"] == ("tuned", 8, 128, 256) and seen["options"] == {
        "x_q_dtype": None}


def test_the_programs_options_add_the_scale_block_only_when_blockwise() -> None:
    fields = dict(x_q_dtype="none", batch_block=8, out_block=128, in_block=128,
                  scale_block=128)
    plain = matmul.program("f", print, blockwise=False).options(fields, False)
    assert plain == dict(x_q_dtype=None, batch_block=8, out_block=128, in_block=128)
    blockwise = matmul.program("f", print, blockwise=True).options(fields, False)
    assert blockwise == {"block_size": 128, **plain}


def test_both_records_judge_by_the_ops_reference_with_the_kernels_rounding() -> None:
    fields = matmul.record_fields("toward-zero")
    assert fields["case_type"] is QmmCase and fields["output_axes"] == {"out": ("row", "dim")}
    case = QmmCase(dtype="float32", seed=1, n_batch=8, n_in=128, n_out=128, batch_block=8,
                   out_block=128, in_block=128, x_q_dtype="int8", w_q_dtype="int8")
    out = fields["reference"](case, case.materialize())["out"]
    assert out.shape == (8, 128)
