"""A hung collective (issue 38): the hang report says which simulated devices wait where;
every device in the interpreter's buffer allocation is named as the jax < 0.11
interpreter's deadlock."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_harness.orchestration.hang_stacks import describe

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.nightly  # hangs per push: test_timeout_progress
def test_a_planted_deadlock_is_a_hang_report_naming_the_waiting_devices():
    proc = subprocess.run(
        [sys.executable, "-m", "kernel_harness.cli", "check", "tpu-all-gather", "--impl",
         "tests.helpers.all_gather_impls:waits_for_a_signal_nobody_sends", "--timeout", "10",
         "--max-examples", "1", "--property", "matches-reference", "--profile", "dev",
         "--seed", "1"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "did not return within --timeout 10s" in proc.stdout
    waiting = [line for line in proc.stdout.splitlines() if line.startswith("  waiting:")]
    case = json.loads(proc.stdout.split("--case '")[1].split("'")[0])
    devices = case["devices"] * case.get("other_axis", 1)  # every device of the mesh waits
    assert len(waiting) == devices, proc.stdout[-3000:]
    assert all("waits on a semaphore" in line and " for 3 " in line for line in waiting)
    assert {line.split("device ")[1].split()[0] for line in waiting} == {
        str(d) for d in range(devices)}
    assert "reproduce: kernel-harness repro tpu-all-gather" in proc.stdout


def test_the_old_interpreters_deadlock_is_named_as_its_own():
    allocating = [{"device": d, "core": 0, "semaphore": None, "value": None,
                   "wait": "_allocate_buffer", "kernel_line": None,
                   "where": "interpret_pallas_call.py:383"} for d in range(8)]
    lines = describe(allocating)
    assert len(lines) == 9 and "the TPU interpreter's own deadlock" in lines[-1]
    assert "not the kernel's" in lines[-1]
    assert describe(None) == ["  waiting: the worker did not say (no TPU-interpreter wait seen)"]
