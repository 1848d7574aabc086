"""flywheel-tpu's fused RoPE (issue 57): a small case of each pairing passes, a planted
bug (rotating backwards) is seen, its bad inputs behave as declared, and where flywheel-tpu
cannot be (Python 3.11) the family says why. (The op, its backward included: tests/ops/
test_rotary.py; every mutant and the export: nightly.)"""

from __future__ import annotations

import sys

import pytest

from kernel_harness.checks import bad_input
from kernel_harness.core.backends import resolve_backend
from kernel_harness.families.flywheel_tpu_rotary.cases import FlywheelRotaryCase
from kernel_harness.run.runner import check_case
from kernel_harness.spec.mutant import load_patched
from kernel_harness.spec.registry import get_family
from tests.helpers.golden_export import export_and_run
from tests.helpers.libraries import flywheel_installed_or_skip

NAME = "flywheel-tpu-rotary"


def _small(pairing: str) -> FlywheelRotaryCase:
    return FlywheelRotaryCase(dtype="float32", seed=3, seq_lens=(5, 9), offsets=(3, 65541),
                              heads=1, head_dim=64, rotary_dim=64, pairing=pairing,
                              pad_tokens=1, head_dim_minor=True, block_tokens=8)


def test_without_flywheel_the_family_says_why():
    family = get_family(NAME)
    assert "pip install --no-deps flywheel-tpu==0.3.0" in family.requires
    if sys.version_info < (3, 12):
        assert not family.backends and family.bad_inputs() == []
        assert "needs Python >= 3.12" in family.summary


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


@pytest.mark.nightly
def test_bad_inputs_behave_as_declared():
    flywheel_installed_or_skip()
    for entry in get_family(NAME).bad_inputs():
        result = bad_input.run_bad_input(NAME, entry)
        assert result.as_declared, result.describe()


@pytest.mark.nightly
def test_the_exported_script_runs_standalone_and_passes(tmp_path):
    """export-repro on the first golden case: the script (jax, numpy and flywheel-tpu only)
    runs the library and the embedded reference, and exits 0."""
    flywheel_installed_or_skip()
    run = export_and_run(NAME, tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "FAIL" not in run.stdout
