"""export-repro for torch-sdpa: the first golden case's script passes with kernel_harness not
importable, a planted wrapper that drops the mask makes it exit 1, a float mask's gradient
is judged too, and where torch does not import the script
says so and exits 2 (not 1: it found nothing). Exporting needs torch in the harness (the
family has no backend without it), so these tests skip without it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="torch is not importable: the torch-sdpa tests need the "
                    "[torch] extra (a separate venv, docs/torch.md)")

from kernel_harness.families.torch_sdpa.cases import TorchSdpaCase  # noqa: E402
from kernel_harness.records.registry import get_family  # noqa: E402
from kernel_harness.regression.export import export_repro  # noqa: E402
from tests.helpers.golden_export import (  # noqa: E402
    export_and_run,
    export_and_run_planted,
    first_golden_case,
)
from tests.helpers.standalone import run_standalone  # noqa: E402

PLANTED = """
import torch


def kernel(query, key, value, attn_mask=None, **options):
    return torch.nn.functional.scaled_dot_product_attention(query, key, value, **options)
"""

#: A clean interpreter where neither kernel_harness nor torch imports.
_WITHOUT_TORCH = r"""
import importlib.abc, runpy, sys

class _Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ("kernel_harness", "torch"):
            raise ModuleNotFoundError(f"No module named {name!r} (hidden by the test)")
        return None

sys.meta_path.insert(0, _Blocked())
sys.argv = [sys.argv[1]]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.mark.nightly  # one family's script; the mechanism runs per push (sdpa, hstu)
def test_first_golden_case_script_passes_standalone(tmp_path: Path) -> None:
    assert first_golden_case("torch-sdpa").mask == "full"  # stored as "bool": upgraded
    good = export_and_run("torch-sdpa", tmp_path)
    assert good.returncode == 0, good.stdout + good.stderr
    assert good.stdout.count("ok  ") == 4


@pytest.mark.nightly  # one family's script; the mechanism runs per push (sdpa, hstu)
def test_planted_dropped_mask_exits_1(tmp_path: Path) -> None:
    bad = export_and_run_planted("torch-sdpa", tmp_path, PLANTED, "planted_torch_sdpa")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "FAIL out" in bad.stdout


def test_a_float_masks_gradient_is_judged(tmp_path: Path) -> None:
    case = TorchSdpaCase(dtype="float32", seed=3, batch=1, q_heads=2, kv_heads=1, q_len=8,
                         kv_len=16, head_dim=16, bias="full", backend="math")
    script, _ = export_repro(get_family("torch-sdpa"), case, tmp_path / "float_mask.py")
    run = run_standalone(script)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "ok   dmask" in run.stdout and run.stdout.count("ok  ") == 5


def test_without_torch_the_script_says_so_and_exits_2(tmp_path: Path) -> None:
    script, _ = export_repro(get_family("torch-sdpa"), first_golden_case("torch-sdpa"),
                             tmp_path / "no_torch.py")
    run = subprocess.run([sys.executable, "-I", "-c", _WITHOUT_TORCH, str(script)],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "needs torch, which does not import here" in run.stderr
    assert "pip install torch" in run.stderr
