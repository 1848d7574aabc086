"""``check --jobs N``: the units run in N worker processes side by side, the summary and the
JSON keep the units' order and verdicts, a native crash in one worker is that unit's CRASH
report while the other worker goes on, and a bad N is a usage error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_harness.records import registry

ROOT = Path(__file__).resolve().parents[2]
CRASHING = ("toy-segfault", "toy-abort", "toy", "--family-module", "tests.helpers.crashing_impls")


def _check(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != registry.FAMILY_MODULES_ENV}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-m", "kernel_harness.cli", "check", *args],
                          capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)


def _records(path: Path) -> list[tuple[str, str, str]]:
    return [(r["family"], r["property"], r["verdict"])
            for r in json.loads(path.read_text())["properties"]]


@pytest.mark.nightly  # two worker processes end to end (14 s per push before)
def test_two_jobs_give_the_one_job_verdicts_in_the_same_order(tmp_path):
    common = [*CRASHING, "--profile", "ci", "--max-examples", "3", "--property",
              "matches-reference", "--property", "deterministic"]
    one, two = tmp_path / "one.json", tmp_path / "two.json"
    p1 = _check(*common, "--json", str(one))
    p2 = _check(*common, "--jobs", "2", "--json", str(two))
    assert p1.returncode == p2.returncode == 1, p2.stdout + p2.stderr
    assert _records(one) == _records(two)
    verdicts = {(f, p): v for f, p, v in _records(two)}
    assert verdicts[("toy", "matches-reference")] == "PASS"
    assert verdicts[("toy-segfault", "matches-reference")] == "FAIL"
    assert "CRASH (SIGSEGV)" in p2.stdout and "CRASH (SIGABRT)" in p2.stdout
    summary = p2.stdout[p2.stdout.rindex("family"):]
    assert summary.index("toy-segfault") < summary.index("toy-abort")


def test_jobs_below_one_is_a_usage_error():
    proc = _check("toy", "--family-module", "tests.helpers.crashing_impls", "--jobs", "0")
    assert proc.returncode == 2
    assert "--jobs must be at least 1, got 0" in proc.stderr
