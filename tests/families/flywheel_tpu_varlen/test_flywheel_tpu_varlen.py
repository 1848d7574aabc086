"""flywheel-tpu-varlen (issue 56): flywheel-tpu's flash_attn_varlen_func on the attention
problem, batch rows packed as sequences. Per push: the packing (pure jnp) and the
declarations; nightly (Python 3.12 with flywheel-tpu, the library's kernels in interpret
mode): the kernel passes its own precision design's yardstick where the plain one fails."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import pytest

from kernel_harness.core.backends import resolve_backend
from kernel_harness.families.flywheel_tpu_varlen import kernel as _kernel
from kernel_harness.families.flywheel_tpu_varlen.cases import FlywheelVarlenCase
from kernel_harness.families.flywheel_tpu_varlen.mutants import MUTANTS
from kernel_harness.ops.attention.record import problem_record
from kernel_harness.records.registry import get_family
from kernel_harness.run.runner import check_case
from tests.helpers.libraries import flywheel_installed_or_skip

#: Three sequences at 16x logits: GQA, causal bottom-right per sequence, one of one query.
CASE = dict(dtype="bfloat16", seed=5, batch=3, q_heads=4, kv_heads=2, q_len=129, kv_len=129,
            head_dim=128, is_causal=True, alignment="bottom-right", logit_scale=16.0,
            q_lengths=(1, 127, 129), kv_lengths=(128, 129, 129), blocks=(128, 128, 64, 128))


@dataclasses.dataclass(frozen=True, kw_only=True)
class PlainDesign(FlywheelVarlenCase):
    """The same kernel, declared as rounding like plain bfloat16 math."""

    FEATURES = dataclasses.replace(FlywheelVarlenCase.FEATURES, precision_design="plain")


def test_packing_puts_each_rows_tokens_first_in_row_order_then_the_padding():
    order, cu = _kernel.packing(jnp.asarray([2, 0, 3]), 3, 4)
    assert cu.tolist() == [0, 2, 2, 5]
    # Row 0's tokens 0-1, row 2's 8-10, then every padding token in order.
    assert order.tolist() == [0, 1, 8, 9, 10, 2, 3, 4, 5, 6, 7, 11]
    whole, cu = _kernel.packing(None, 2, 3)
    assert whole.tolist() == list(range(6)) and cu.tolist() == [0, 3, 6]


def test_the_family_declares_the_flash_design_bottom_right_and_forward_only():
    family = get_family("flywheel-tpu-varlen")
    features = family.case_type.FEATURES
    assert features.precision_design == "flash" and features.alignments == ("bottom-right",)
    assert features.dtypes == ("bfloat16",) and not features.gradients
    assert set(family.output_axes) == {"out", "lse"}
    assert family.tolerances.lookup("bfloat16", "out").calibrated is not None


def test_the_catalog_has_five_mutants_or_more_with_a_ci_subset():
    assert len({m.name for m in MUTANTS}) == len(MUTANTS) >= 5
    assert sum("ci" in m.tags for m in MUTANTS) >= 3


@pytest.mark.nightly
def test_its_own_design_passes_where_the_plain_yardstick_fails():
    flywheel_installed_or_skip()
    family, backend = get_family("flywheel-tpu-varlen"), resolve_backend("interpret")
    own = check_case(family, FlywheelVarlenCase(**CASE), backend)
    assert own.passed, [v.problems for v in own.failures]
    record = problem_record(PlainDesign, traceable=_kernel.traceable)
    plain = dataclasses.replace(family, **{k: record[k] for k in (
        "case_type", "reference", "low_precision_reference")})
    result = check_case(plain, PlainDesign(**CASE), backend)
    failed = {v.stats.output: v.problems for v in result.failures}
    assert "out" in failed and any("calibrated" in p for p in failed["out"]), failed
