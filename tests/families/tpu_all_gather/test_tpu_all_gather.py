"""tpu-all-gather (issue 38): jax's all-gather is wrong at 3 or more devices under the
interpreter's out-of-order DMA schedule and the check says so (the schedule, the NaN rows,
the race's source line); two devices and the in-order schedule are right; the corrected
ring passes; every device's copy is judged; a process with too few devices is told how to
get them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_harness.core.backends import resolve_backend
from kernel_harness.core.compat.mesh import tpu_interpreter_max_devices
from kernel_harness.kernels.all_gather_ring import all_gather as ring
from kernel_harness.ops.all_gather.cases import AllGatherCase
from kernel_harness.ops.mesh import MAX_DEVICES, drawn_max_devices
from kernel_harness.records.registry import get_family
from kernel_harness.run.runner import check_case
from tests.helpers.all_gather_impls import right_on_device_0_only

ROOT = Path(__file__).resolve().parents[3]
FAMILY = get_family("tpu-all-gather")
TPU_INTERPRET = resolve_backend("tpu-interpret")


def _case(devices: int, dma_mode: str = "on_wait", **kw) -> AllGatherCase:
    fields = {"dtype": "float32", "seed": 7, "shard_rows": 16, "cols": 128, **kw}
    return AllGatherCase(devices=devices, dma_mode=dma_mode, **fields)


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kernel_harness.cli", *args],
                          capture_output=True, text=True, timeout=600, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


def test_jax_kernel_fails_a_ci_check_naming_devices_schedule_and_source_line():
    proc = _cli("check", "tpu-all-gather", "--backend", "tpu-interpret", "--profile", "ci",
                "--seed", "1", "--property", "matches-reference")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    first = next(line for line in proc.stdout.splitlines()
                 if line.startswith("[kernel-harness] ") and "tpu-all-gather" in line)
    devices = int(first.split("devices=")[1].split()[0])
    assert devices >= 3 and "dma=on_wait" in first, first
    assert "all_gather.py:" in proc.stdout and "by a DMA" in proc.stdout
    assert ("race in kernel" in proc.stdout) or ("uninitialized-read" in proc.stdout)
    assert "--case '" in proc.stdout and '"dma_mode":"on_wait"' in proc.stdout


@pytest.mark.parametrize("dma_mode", ["on_wait", "eager"])
def test_jax_kernel_is_right_on_two_devices(dma_mode):
    result = check_case(FAMILY, _case(2, dma_mode), TPU_INTERPRET)
    assert result.passed, result.failures


def test_jax_kernel_is_right_at_three_devices_when_dmas_complete_in_order():
    result = check_case(FAMILY, _case(3, "eager", shard_rows=32), TPU_INTERPRET)
    assert result.passed, result.failures


@pytest.mark.parametrize("devices", [3, 4])
def test_the_ring_with_a_receive_semaphore_per_step_passes_out_of_order(devices):
    for seed in (1, 2):
        result = check_case(FAMILY, _case(devices, seed=seed), TPU_INTERPRET, ring)
        assert result.passed, result.failures


@pytest.mark.parametrize("other_axis_first", [True, False])
def test_on_a_2d_mesh_each_row_gathers_and_every_device_is_judged(other_axis_first):
    """jax's kernel and the ring on a (2, 2) mesh, the gathered axis first or last, one
    after the other in this process: the TPU interpreter would reuse the first layout's
    program for the second (devices 1 and 2 then wrong; jax 0.10.2 and 0.12.0.1) unless
    the harness drops it (core/compat/mesh.before_mesh_call)."""
    for impl in (None, ring):
        for first in (other_axis_first, not other_axis_first):
            case = _case(2, other_axis=2, other_axis_first=first)
            result = check_case(FAMILY, case, resolve_backend("interpret"), impl)
            assert result.passed, (first, impl, result.failures)
            (verdict,) = result.verdicts
            assert verdict.stats.shape == (4, 32, 128)  # the copy of every device of the mesh


def test_every_device_is_judged_not_only_device_0():
    result = check_case(FAMILY, _case(3, "eager"), resolve_backend("interpret"),
                        right_on_device_0_only)
    (verdict,) = result.failures
    assert verdict.stats.worst_index[0] in (1, 2)  # device 0's copy is right
    assert verdict.stats.worst_location.startswith(("device=1", "device=2"))


def test_the_strategy_keeps_to_what_this_jax_interpreter_runs():
    limit = tpu_interpreter_max_devices()
    assert drawn_max_devices() == (MAX_DEVICES if limit is None else min(limit, MAX_DEVICES))
    assert FAMILY.devices == MAX_DEVICES


def test_a_process_with_too_few_devices_is_told_how_to_get_them():
    proc = _cli("check", "tpu-all-gather", "--no-isolate", "--profile", "dev",
                env={"XLA_FLAGS": "--xla_force_host_platform_device_count=2"})
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "needs 8 cpu devices; this process has 2" in proc.stderr
    assert "--xla_force_host_platform_device_count=8" in proc.stderr
