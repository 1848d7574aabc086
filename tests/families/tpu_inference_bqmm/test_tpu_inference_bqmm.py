"""tpu-inference's blockwise quantized matmul (issue 37): the pristine kernel passes its seed
cases under the calibrated bound, its bfloat16 accumulation is visible (a float32 result of
bfloat16 accuracy, judged against the bfloat16 twin, not against float32), and the sizes
its findings exclude are never drawn. (The op: tests/ops/test_quantized_matmul.py; the
findings' scripts: tests/test_findings.py.)"""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from kernel_harness.core.backends import resolve_backend
from kernel_harness.records.registry import get_family
from kernel_harness.run.runner import check_case
from tests.helpers.libraries import tpu_inference_installed_or_skip

NAME = "tpu-inference-blockwise-quantized-matmul"


# Nightly: the pristine kernel; its goldens run per push.
@pytest.mark.nightly
def test_the_pristine_kernel_passes_with_bfloat16_accuracy():
    tpu_inference_installed_or_skip()
    family, backend = get_family(NAME), resolve_backend("interpret")
    for case in family.seed_cases(frozenset()):
        ok = check_case(family, case, backend)
        assert ok.passed, [v.problems for v in ok.verdicts]
        (verdict,) = ok.verdicts
        assert verdict.judged_by == "calibrated"
        # bfloat16 accumulation: far above float32 rounding, within a few bfloat16 steps
        assert 2.0**-12 < verdict.stats.max_rel_err < 2.0**-5, verdict.stats.max_rel_err


@settings(max_examples=40, deadline=None, database=None)
@given(case=get_family(NAME).cases())
def test_only_whole_tiles_and_float8_are_drawn(case):
    """The findings' sizes (partial in- and out-tiles) and int8 are outside the strategy."""
    assert case.n_in % case.in_block == 0 and case.n_out % case.out_block == 0
    assert case.w_q_dtype == "float8_e4m3fn" and case.x_q_dtype in ("float8_e4m3fn", "none")
    assert case.scale_block is not None and case.in_block % case.scale_block == 0
