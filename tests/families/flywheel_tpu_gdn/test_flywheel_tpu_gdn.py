"""flywheel-tpu-gdn and flywheel-tpu-kda (issue 57): flywheel-tpu's fused conv1d + Gated
DeltaNet and KDA serving kernels on the delta-rule op's serving form. A small ragged batch
passes and ignoring the read slots is seen; the seed case's hard paths; the untouched
slots' bits. (The op's serving reference against a float64 loop:
tests/ops/test_delta_rule_serving.py; where flywheel-tpu cannot be and the export:
tests/families/test_flywheel_tpu_library.py; every mutant: nightly.)"""

from __future__ import annotations

import dataclasses
import importlib

import numpy as np
import pytest

from kernel_harness.core.backends import resolve_backend
from kernel_harness.families.flywheel_tpu.linear_attention import untouched_bits
from kernel_harness.records.mutant import load_patched
from kernel_harness.records.registry import get_family
from kernel_harness.run.runner import check_case
from tests.helpers.libraries import flywheel_installed_or_skip

FAMILIES = {"flywheel-tpu-gdn": "flywheel_tpu_gdn", "flywheel-tpu-kda": "flywheel_tpu_kda"}


def _seed(name: str):
    return get_family(name).seed_cases(frozenset())[0]


@pytest.mark.parametrize("name", FAMILIES)
def test_the_seed_case_reaches_the_hard_paths(name):
    events = set(get_family(name).events(_seed(name)))
    assert {"decode-beside-prefill", "multi-chunk-sequence", "partial-last-chunk",
            "shorter-than-conv-state", "misaligned-start", "read-slot-differs",
            "unused-slots", "padding-rows", "grouped-heads"} <= events
    assert f"gate:{'channel' if name.endswith('kda') else 'head'}" in events


def test_untouched_bits_see_one_changed_bit():
    seed = _seed("flywheel-tpu-gdn")
    inputs = seed.materialize()
    conv, rec = inputs["conv_state"], inputs["recurrent_state"].copy()
    before = untouched_bits(seed, conv, rec)
    rec.view(np.uint32)[0, 0, 0, 0] ^= 1  # slot 0 (the null slot) is never written
    assert (untouched_bits(seed, conv, rec) != before).sum() == 1


@pytest.mark.parametrize("name", FAMILIES)
def test_a_small_batch_passes_and_ignoring_the_read_slots_is_seen(name):
    flywheel_installed_or_skip()
    mutants = importlib.import_module(f"kernel_harness.families.{FAMILIES[name]}.mutants")
    family, backend = get_family(name), resolve_backend("interpret")
    case = dataclasses.replace(_seed(name), lengths=(1, 1, 20, 2), histories=(9, 3, 0, 5))
    result = check_case(family, case, backend)
    assert result.passed, [v.problems for v in result.verdicts]
    module = load_patched(next(m for m in mutants.MUTANTS if m.name == "read-slots-ignored"))
    function = family.kernel.__name__

    def impl(*args, **kwargs):
        return getattr(module, function)(*args, **kwargs)

    assert not check_case(family, case, backend, impl).passed
