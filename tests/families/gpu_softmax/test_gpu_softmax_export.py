"""export-repro for gpu-softmax: the first golden case's script passes with kernel_harness not
importable, a planted 1% error makes it exit 1.
(Its reference agrees with the harness's: tests/families/test_export_contract.py.)"""

from __future__ import annotations

from pathlib import Path

from tests.helpers.golden_export import export_and_run, export_and_run_planted

PLANTED = """
from jax.experimental.pallas.ops.gpu.softmax import softmax


def kernel(x, *, axis=-1, interpret=False):
    return softmax(x, axis=axis, interpret=interpret) * 1.01
"""


def test_first_golden_case_script_passes_standalone(tmp_path: Path) -> None:
    good = export_and_run("gpu-softmax", tmp_path)
    assert good.returncode == 0, good.stdout + good.stderr
    assert good.stdout.count("ok  ") == 1


def test_planted_error_exits_1(tmp_path: Path) -> None:
    bad = export_and_run_planted("gpu-softmax", tmp_path, PLANTED, "planted_gpu_softmax")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "FAIL out" in bad.stdout
