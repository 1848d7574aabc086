"""tpu-inference's all-gather matmul (issue 38): right on 2..4 simulated devices under both
DMA schedules with explicit blocks; its default block (bn = n, not n / devices, for any
shape its tuned table lacks) reads y out of bounds; a planted missing wait is caught."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_harness.core.backends import resolve_backend
from kernel_harness.ops.all_gather_matmul.cases import AgmmCase
from kernel_harness.records.registry import get_family
from kernel_harness.run.runner import check_case
from tests.helpers.libraries import tpu_inference_installed_or_skip

ROOT = Path(__file__).resolve().parents[3]
NAME = "tpu-inference-all-gather-matmul"
TPU_INTERPRET = resolve_backend("tpu-interpret")


@pytest.fixture(autouse=True)
def _installed() -> None:
    tpu_inference_installed_or_skip()


def _case(devices: int, **kw) -> AgmmCase:
    fields = {"dtype": "float32", "seed": 5, "m_per_device": 16, "k": 256,
              "n_per_device": 256, "bn": 128, "bk": 128, "dma_mode": "on_wait", **kw}
    return AgmmCase(devices=devices, **fields)


@pytest.mark.parametrize(("devices", "kw"), [
    (2, {}), (3, {"rhs_transpose": True}), (4, {"dtype": "bfloat16", "dma_mode": "eager"})])
def test_right_with_explicit_blocks(devices, kw):
    result = check_case(get_family(NAME), _case(devices, **kw), TPU_INTERPRET)
    assert result.passed, result.failures


def test_the_default_block_reads_y_out_of_bounds():
    with pytest.raises(Exception, match=r"Out-of-bounds read"):
        check_case(get_family(NAME), _case(2, bn=0, bk=0, k=128, n_per_device=128),
                   TPU_INTERPRET)


# Nightly: tpu-all-gather's planted races take the same path per push.
@pytest.mark.nightly
@pytest.mark.slow  # 32 s on jax 0.12 (12 s on 0.10): per push on the first stack only
def test_a_planted_missing_wait_is_killed():
    proc = subprocess.run(
        [sys.executable, "-m", "kernel_harness.cli", "mutate", NAME, "--mutant",
         "first-left-wait-dropped", "--profile", "ci", "--max-examples", "4", "--property",
         "matches-reference", "--no-golden"],
        capture_output=True, text=True, timeout=900, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "first-left-wait-dropped" in proc.stdout and "KILLED" in proc.stdout
    assert "1/1 mutants killed" in proc.stdout


def test_a_crashed_collective_does_not_fail_the_next_examples():
    """The crash leaves its error in jax's per-device effect tokens; before the runner
    drained them every later example on those devices failed with it."""
    with pytest.raises(Exception, match=r"Out-of-bounds read"):
        check_case(get_family(NAME), _case(2, bn=0, bk=0, k=128, n_per_device=128),
                   TPU_INTERPRET)
    for seed in (1, 2):
        result = check_case(get_family(NAME), _case(2, seed=seed, k=128, n_per_device=128),
                            TPU_INTERPRET)
        assert result.passed, result.failures


def test_a_program_counted_under_other_interpreter_settings_is_not_reused():
    """The counted program of a configuration, traced once on ``interpret`` (no race
    detection) or under one DMA schedule, must not run on ``tpu-interpret`` or under the
    other schedule: seen in CI (2026-12-05) as a golden case on ``interpret`` and then the
    same configuration on ``tpu-interpret`` in one worker, where the race detector recorded
    no access (kernel_count keyed its programs on the call alone)."""
    family, case = get_family(NAME), _case(2, seed=1, k=128, n_per_device=128)
    assert check_case(family, case, resolve_backend("interpret")).passed
    for dma_mode in ("on_wait", "eager"):
        result = check_case(family, _case(2, seed=1, k=128, n_per_device=128,
                                          dma_mode=dma_mode), TPU_INTERPRET)
        assert result.passed, result.failures
