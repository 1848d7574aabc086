"""``check --timeout``: a kernel that never returns (inside XLA, or inside a Pallas
interpreter loop) is a FAIL naming the case with its repro command, and the run goes on;
progress lines come at a steady cadence, never per example."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jsonschema
import pytest

from kernel_harness.checks.properties import Observer
from kernel_harness.orchestration import results, watch
from kernel_harness.records import registry


@pytest.mark.slow
def test_hanging_kernels_fail_within_the_timeout_and_the_run_goes_on(tmp_path):
    out = tmp_path / "r.json"
    env = {k: v for k, v in os.environ.items() if k != registry.FAMILY_MODULES_ENV}
    proc = subprocess.run(
        [sys.executable, "-m", "kernel_harness.cli", "check", "toy-hang-xla", "toy-hang-pallas",
         "toy", "--family-module", "tests.helpers.hanging_family", "--timeout", "5",
         "--profile", "ci", "--max-examples", "3", "--property", "matches-reference",
         "--json", str(out)],
        capture_output=True, text=True, timeout=300, env=env,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, json.loads(results.SCHEMA_PATH.read_text()))
    verdicts = {(r["family"], r["verdict"]) for r in doc["properties"]}
    assert verdicts == {("toy-hang-xla", "FAIL"), ("toy-hang-pallas", "FAIL"), ("toy", "PASS")}
    for fam in ("toy-hang-xla", "toy-hang-pallas"):
        (rec,) = [r for r in doc["properties"] if r["family"] == fam]
        failure = rec["failure"]
        assert failure["timeout_seconds"] == 5 and 5 <= rec["seconds"] < 30
        assert json.loads(failure["case_json"])["length"] in (4, 8)
        assert failure["repro"].startswith(f"kernel-harness repro {fam} --backend interpret ")
        assert "--family-module tests.helpers.hanging_family" in failure["repro"]
        assert f"=== {fam} / matches-reference TIMED OUT on interpret ===" in proc.stdout
    assert "did not return within --timeout 5s" in proc.stdout


def test_progress_prints_at_the_cadence_not_per_example(monkeypatch, capsys):
    clock = [0.0]
    monkeypatch.setattr(watch.time, "monotonic", lambda: clock[0])
    obs = Observer()
    progress = watch.Progress("fam", "prop", obs, every=30.0)
    for _ in range(200):  # 200 examples, one every 0.5 s: 100 s in all
        clock[0] += 0.5
        obs.examples += 1
        obs.checks += 2
        obs.passed += 1 if obs.examples % 50 else 0
        obs.rejected += obs.examples % 40 == 0
        progress.tick()
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3, lines  # at 30 s, 60 s, 90 s
    assert lines[0] == ("  progress fam prop: 60 examples (120 checks) in 30s (120.0/min), "
                        "1 failed, 1 rejected so far")


def test_negative_timeout_is_a_usage_error(capsys):
    from kernel_harness import cli

    assert cli.main(["check", "hstu", "--timeout", "-1"]) == 2
    assert "--timeout must be positive" in capsys.readouterr().err
