"""What flywheel-tpu's families (issues 56 and 57) share, checked once for each: where
the library cannot be (Python 3.11, or not installed) the family says why and has no
backend; its declared bad inputs behave as declared; the exported script of its first
golden case runs standalone and passes. (Each family's own tests: tests/families/
flywheel_tpu_*/.)"""

from __future__ import annotations

import sys

import pytest

from kernel_harness.checks import bad_input
from kernel_harness.families.flywheel_tpu import library
from kernel_harness.records.registry import get_family
from tests.helpers.golden_export import export_and_run
from tests.helpers.libraries import flywheel_installed_or_skip

FAMILIES = ("flywheel-tpu-kv-cache-write", "flywheel-tpu-ragged-append", "flywheel-tpu-rotary",
            "flywheel-tpu-flash", "flywheel-tpu-paged-decode", "flywheel-tpu-varlen-paged",
            "flywheel-tpu-varlen", "flywheel-tpu-gdn", "flywheel-tpu-kda")
#: The families that declare bad inputs (ragged-append declares none).
WITH_BAD_INPUTS = ("flywheel-tpu-kv-cache-write", "flywheel-tpu-rotary")


@pytest.mark.parametrize("name", FAMILIES)
def test_without_flywheel_the_family_says_why(name, monkeypatch):
    """On Python 3.11 (or where it is not installed) no backend, no bad input to run, and
    ``list`` says why."""
    family = get_family(name)
    assert "pip install --no-deps flywheel-tpu==0.3.0" in family.requires
    assert "Python >= 3.12" in family.requires
    if sys.version_info < (3, 12):
        assert not family.backends
        assert "needs Python >= 3.12" in family.summary
        assert family.bad_inputs is None or family.bad_inputs() == []
    monkeypatch.setattr(sys, "version_info", (3, 11, 7))
    assert "needs Python >= 3.12, this is Python 3.11" in library.unavailable_reason()


def test_the_bad_input_list_names_every_family_that_declares_some():
    assert {n for n in FAMILIES if get_family(n).bad_inputs is not None} == set(WITH_BAD_INPUTS)


@pytest.mark.nightly
@pytest.mark.parametrize("name", WITH_BAD_INPUTS)
def test_bad_inputs_behave_as_declared(name):
    flywheel_installed_or_skip()
    for entry in get_family(name).bad_inputs():
        result = bad_input.run_bad_input(name, entry)
        assert result.as_declared, result.describe()


@pytest.mark.nightly
@pytest.mark.parametrize("name", FAMILIES)
def test_the_exported_script_runs_standalone_and_passes(name, tmp_path):
    """export-repro on the first golden case: the script (jax, numpy and flywheel-tpu only)
    runs the library and the embedded reference, and exits 0."""
    flywheel_installed_or_skip()
    run = export_and_run(name, tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "FAIL" not in run.stdout
