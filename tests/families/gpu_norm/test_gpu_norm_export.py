"""export-repro for gpu-norm: the first golden case's script passes with kernel_harness not
importable, a planted 1% error makes it exit 1.
(Its reference agrees with the harness's: tests/families/test_export_contract.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.golden_export import export_and_run, export_and_run_planted

PLANTED = """
from jax.experimental.pallas.ops.gpu import layer_norm, rms_norm


def kernel(op, x, weight, bias, *, eps, interpret):
    fn = layer_norm.layer_norm if op == "layer_norm" else rms_norm.rms_norm
    return fn(x, weight, bias, eps=eps, interpret=interpret) * 1.01
"""


@pytest.mark.nightly  # one family's script; the mechanism runs per push (sdpa, hstu)
def test_first_golden_case_script_passes_standalone(tmp_path: Path) -> None:
    good = export_and_run("gpu-norm", tmp_path)
    assert good.returncode == 0, good.stdout + good.stderr
    assert good.stdout.count("ok  ") == 4


@pytest.mark.nightly  # one family's script; the mechanism runs per push (sdpa, hstu)
def test_planted_error_exits_1(tmp_path: Path) -> None:
    bad = export_and_run_planted("gpu-norm", tmp_path, PLANTED, "planted_gpu_norm")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "FAIL out" in bad.stdout
