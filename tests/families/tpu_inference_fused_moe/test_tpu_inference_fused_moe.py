"""tpu-inference's fused expert-parallel MoE (issue 38): right against the MoE op on
simulated devices with the family's interpreter settings; without reads of zero rows at a
buffer's end allowed, jax's interpreter rejects the kernel's zero-length copies (the
contract's reason for the setting)."""

from __future__ import annotations

import dataclasses

import pytest

from kernel_harness.core.backends import resolve_backend
from kernel_harness.families.tpu_inference_fused_moe import kernel as moe_kernel
from kernel_harness.records.registry import get_family
from kernel_harness.run.runner import check_case
from tests.helpers.libraries import tpu_inference_installed_or_skip

NAME = "tpu-inference-fused-moe"
INTERPRET = resolve_backend("interpret")


@pytest.fixture(autouse=True)
def _installed() -> None:
    tpu_inference_installed_or_skip()


def _first_seed():
    return get_family(NAME).seed_cases(frozenset())[0]


def test_two_devices_top_1_match_the_moe_op():
    result = check_case(get_family(NAME), _first_seed(), INTERPRET)
    assert result.passed, result.failures


def test_without_zero_length_reads_allowed_the_interpreter_rejects_the_kernel(monkeypatch):
    monkeypatch.setattr(moe_kernel, "INTERPRETER_SETTINGS", {"uninitialized_memory": "nan"})
    # Two experts per device, top 2, DMAs in issue order: a zero-length copy at a buffer's
    # end (rows 8:8 of 8) is executed, and rejected, as it is issued.
    case = dataclasses.replace(_first_seed(), experts_per_device=2, top_k=2, dma_mode="eager")
    with pytest.raises(Exception, match=r"Out-of-bounds read"):
        check_case(get_family(NAME), case, INTERPRET)
