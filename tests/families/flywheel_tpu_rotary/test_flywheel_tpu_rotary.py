"""flywheel-tpu's fused RoPE (issue 57): a small case of each pairing passes and a planted
bug (rotating backwards) is seen. (The op, its backward included: tests/ops/
test_rotary.py; where flywheel-tpu cannot be, bad inputs and the export: tests/families/
test_flywheel_tpu_library.py; every mutant: nightly.)"""

from __future__ import annotations

import pytest

from kernel_harness.core.backends import resolve_backend
from kernel_harness.families.flywheel_tpu_rotary.cases import FlywheelRotaryCase
from kernel_harness.records.mutant import load_patched
from kernel_harness.records.registry import get_family
from kernel_harness.run.runner import check_case
from tests.helpers.libraries import flywheel_installed_or_skip

NAME = "flywheel-tpu-rotary"


def _small(pairing: str) -> FlywheelRotaryCase:
    return FlywheelRotaryCase(dtype="float32", seed=3, seq_lens=(5, 9), offsets=(3, 65541),
                              heads=1, head_dim=64, rotary_dim=64, pairing=pairing,
                              pad_tokens=1, head_dim_minor=True, block_tokens=8)


@pytest.mark.parametrize("pairing", ["split", "interleaved"])
def test_a_small_case_passes(pairing):
    flywheel_installed_or_skip()
    result = check_case(get_family(NAME), _small(pairing), resolve_backend("interpret"))
    assert result.passed, [v.problems for v in result.verdicts]
    assert max(v.stats.max_rel_err for v in result.verdicts) < 1e-6


def test_rotating_backwards_is_seen():
    flywheel_installed_or_skip()
    from kernel_harness.families.flywheel_tpu_rotary import kernel
    from kernel_harness.families.flywheel_tpu_rotary.mutants import MUTANTS

    mutant = next(m for m in MUTANTS if m.name == "rotates-backwards")
    patched = load_patched(mutant)

    def impl(*args, **kwargs):  # the adapter's kernel around the mutated module (traced)
        original, kernel._LOADED = kernel._LOADED, patched
        try:
            return kernel.rotary(*args, **kwargs)
        finally:
            kernel._LOADED = original

    result = check_case(get_family(NAME), _small("split"), resolve_backend("interpret"), impl)
    assert not result.passed
    assert max(v.stats.max_rel_err for v in result.verdicts) > 0.1
