"""flywheel-tpu-flash (issue 56): flywheel-tpu's flash_attn_func on the attention problem,
judged against the flash precision design's yardstick. The same kernel judged against the
plain yardstick fails at 16x logits for a rounding it was designed with; against its own
design it passes (Python 3.12 with flywheel-tpu; nightly: each case runs the library's
kernels in interpret mode)."""

from __future__ import annotations

import dataclasses

import pytest

from kernel_harness.core.backends import resolve_backend
from kernel_harness.families.flywheel_tpu_flash import kernel as _kernel
from kernel_harness.families.flywheel_tpu_flash.cases import FlywheelFlashCase
from kernel_harness.ops.attention.record import problem_record
from kernel_harness.records.registry import get_family
from kernel_harness.run.runner import check_case
from tests.helpers.libraries import flywheel_installed_or_skip

#: The stored golden case at 16x logits: GQA, causal bottom-right, more queries than keys.
CASE = dict(dtype="bfloat16", seed=21, batch=1, q_heads=4, kv_heads=2, q_len=192, kv_len=128,
            head_dim=64, is_causal=True, alignment="bottom-right", logit_scale=16.0)


@dataclasses.dataclass(frozen=True, kw_only=True)
class PlainDesign(FlywheelFlashCase):
    """The same kernel, declared as rounding like plain bfloat16 math."""

    FEATURES = dataclasses.replace(FlywheelFlashCase.FEATURES, precision_design="plain")


def test_the_family_declares_the_flash_design_and_bottom_right_causal():
    features = get_family("flywheel-tpu-flash").case_type.FEATURES
    assert features.precision_design == "flash" and features.alignments == ("bottom-right",)
    assert features.dtypes == ("bfloat16",)


@pytest.mark.nightly
def test_its_own_design_passes_where_the_plain_yardstick_fails():
    flywheel_installed_or_skip()
    family, backend = get_family("flywheel-tpu-flash"), resolve_backend("interpret")
    own = check_case(family, FlywheelFlashCase(**CASE), backend)
    assert own.passed, [v.problems for v in own.failures]
    plain = dataclasses.replace(family, **problem_record(PlainDesign,
                                                         traceable=_kernel.traceable))
    result = check_case(plain, PlainDesign(**CASE), backend)
    failed = {v.stats.output: v.problems for v in result.failures}
    assert "out" in failed and any("calibrated" in p for p in failed["out"]), failed
