"""tpu-inference's quantized matmul (issue 37): the pristine kernel passes, the rounding
it does (truncation) is told from the rounding its own package's tests assume (to
nearest). (The op: tests/ops/test_quantized_matmul.py; loading without vLLM, and the
listing without tpu-inference: tests/families/test_tpu_inference_loader.py.)"""

from __future__ import annotations

import dataclasses

import pytest

from kernel_harness.core.backends import resolve_backend
from kernel_harness.ops.quantized_matmul.cases import QmmCase
from kernel_harness.ops.quantized_matmul.reference import reference_for
from kernel_harness.records.registry import get_family
from kernel_harness.run.runner import check_case
from tests.helpers.libraries import tpu_inference_installed_or_skip

NAME = "tpu-inference-quantized-matmul"


# Nightly: the pristine kernel; its goldens run per push.
@pytest.mark.nightly
def test_the_pristine_kernel_passes_and_rounding_to_nearest_is_seen():
    """The finding: the kernel truncates. Judged as truncating it matches bit for bit in
    float32 (and within bfloat16's output rounding); judged as rounding to nearest (the
    package's own test reference) it is off by about 1e-2 of the output's scale."""
    tpu_inference_installed_or_skip()
    family, backend = get_family(NAME), resolve_backend("interpret")
    nearest = dataclasses.replace(family, reference=reference_for("nearest"))
    for case in family.seed_cases(frozenset()):
        ok = check_case(family, case, backend)
        assert ok.passed, [v.problems for v in ok.verdicts]
        worst = max(v.stats.max_rel_err for v in ok.verdicts)
        assert worst <= (0.0 if case.dtype == "float32" else 4e-3), worst
        if case.x_q_dtype != "int8":
            continue  # float8 rounds to nearest by its format
        off = check_case(nearest, case, backend)
        assert not off.passed
        assert max(v.stats.max_rel_err for v in off.verdicts) > 5e-3


def test_only_tilings_that_lower_for_tpu_are_cases():
    """lowers-for-tpu found it: the kernel's row-max block (1, batch_block) lowers only
    when batch_block is a multiple of 128 or covers the whole batch."""
    QmmCase(dtype="float32", seed=0, n_batch=20, n_in=128, n_out=128, batch_block=32)
    QmmCase(dtype="float32", seed=0, n_batch=200, n_in=128, n_out=128, batch_block=128)
    with pytest.raises(ValueError, match="lowers for TPU only when"):
        QmmCase(dtype="float32", seed=0, n_batch=20, n_in=128, n_out=128, batch_block=8)

