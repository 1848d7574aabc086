"""export-repro for megablox-gmm: the first golden case's script passes with kernel_harness not
importable, a planted 1% error makes it exit 1.
(Its reference agrees with the harness's: tests/families/test_export_contract.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.golden_export import export_and_run, export_and_run_planted

PLANTED = """
from jax.experimental.pallas.ops.tpu.megablox.ops import gmm


def kernel(lhs, rhs, *args):
    return gmm(lhs, rhs * 1.01, *args)
"""


@pytest.mark.nightly  # one family's script; the mechanism runs per push (sdpa, hstu)
def test_first_golden_case_script_passes_standalone(tmp_path: Path) -> None:
    good = export_and_run("megablox-gmm", tmp_path)
    assert good.returncode == 0, good.stdout + good.stderr
    assert good.stdout.count("ok  ") == 3


@pytest.mark.nightly  # one family's script; the mechanism runs per push (sdpa, hstu)
def test_planted_error_exits_1(tmp_path: Path) -> None:
    bad = export_and_run_planted("megablox-gmm", tmp_path, PLANTED, "planted_megablox_gmm")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "FAIL out" in bad.stdout
