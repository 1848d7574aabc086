"""families/tpu_inference/loader.py: every tpu-inference family's kernels load without vLLM
or the package's ``__init__``, and without tpu-inference every one is listed as needing it
(never an import error)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kernel_harness.records.registry import BUILTIN_FAMILIES, get_family
from tests.helpers.libraries import tpu_inference_installed_or_skip

ROOT = Path(__file__).resolve().parents[2]
FAMILIES = [n for n in BUILTIN_FAMILIES if n.startswith("tpu-inference-")]


def test_the_tpu_inference_families_are_the_ones_that_require_it():
    assert len(FAMILIES) >= 3
    for name in BUILTIN_FAMILIES:
        assert ("tpu-inference" in get_family(name).requires) == (name in FAMILIES), name


def test_the_kernels_load_without_vllm_or_the_package_init():
    tpu_inference_installed_or_skip()
    modules = "; ".join(f"import {BUILTIN_FAMILIES[n].partition(':')[0]}" for n in FAMILIES)
    code = (f"import sys; {modules}; "
            "assert 'vllm' not in sys.modules, 'vllm imported'; "
            "assert not hasattr(sys.modules['tpu_inference'], '__file__'), 'real __init__'; "
            "from kernel_harness.records.registry import get_family; "
            "from kernel_harness.core import compat; "
            "print(compat.pallas_tpu_has('reciprocal'), "
            f"[sorted(get_family(n).backends) for n in {FAMILIES!r}])")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # every family runs here, but the head_dim-64 RPA where jax lacks pltpu.reciprocal
    runs_everywhere = [n for n in FAMILIES if n != "tpu-inference-rpa-v3-hd64"]
    expected = len(FAMILIES) if proc.stdout.startswith("True") else len(runs_everywhere)
    assert proc.stdout.count("tpu-interpret") == expected


def test_the_bare_packages_can_be_found_again():
    """importlib.util.find_spec on a prepared package works (a module without a __spec__
    makes it raise: tests/test_findings.py asks it of the findings' required modules)."""
    tpu_inference_installed_or_skip()
    code = ("import importlib.util, kernel_harness.families.tpu_inference.loader as l; "
            "l.prepare_packages(); "
            "print(importlib.util.find_spec('tpu_inference').submodule_search_locations, "
            "importlib.util.find_spec('tpu_inference.kernels.mla') is not None)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "tpu_inference" in proc.stdout and proc.stdout.strip().endswith("True")


@pytest.fixture(scope="module")
def listed_without_tpu_inference() -> str:
    code = ("import sys; sys.modules['tpu_inference'] = None; "
            "from kernel_harness.cli import main; sys.exit(main(['list']))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@pytest.mark.parametrize("name", FAMILIES)
def test_without_tpu_inference_the_family_is_listed_as_needing_it(
        listed_without_tpu_inference, name):
    row = next(line for line in listed_without_tpu_inference.splitlines()
               if line.startswith(name + " "))
    assert "needs tpu-inference" in row and "tpu-interpret" not in row, row


def test_kernel_modules_where_tpu_inference_is_missing():
    """Where it is not installed a family's modules are none, its backends none, and
    calling its kernel is an ImportError saying what to install."""
    from kernel_harness.families.tpu_inference.modules import KernelModules

    modules = KernelModules("quantized_matmul.kernel", available=False, missing="install it")
    assert not modules and modules.backends == frozenset()
    with pytest.raises(ImportError, match="install it"):
        modules["kernel"]
