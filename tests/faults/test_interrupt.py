"""Issue 39 item 1: a signal ends a run cleanly. A real ``kernel-harness check`` process on
the toy family is sent SIGTERM right after its first failure: it exits 3, its JSON and JUnit
hold the finished unit and the INTERRUPTED one (with its examples and the failure found),
the corpus holds the failure, and ``--resume`` completes the run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest
from junitparser import JUnitXml

from kernel_harness.orchestration import results
from kernel_harness.orchestration.corpus import open_corpus
from kernel_harness.orchestration.interrupt import EXIT_INTERRUPTED
from kernel_harness.records import registry

ROOT = Path(__file__).resolve().parents[2]
SLOW = "tests.helpers.toy_impls:slow_wrong_at_length_8"


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "kernel_harness.cli", "check", "toy", "--family-module",
            "tests.helpers.toy_family", "--profile", "ci", "--property", "deterministic",
            "--property", "matches-reference", "--impl", SLOW, "--seed", "1",
            # one draw per example: the first failure is reported as soon as it is found,
            # not after the example's other draws (2 s each once the impl has failed)
            "--draws-per-compile", "1", *args]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != registry.FAMILY_MODULES_ENV}
    env["PYTHONPATH"] = str(ROOT)
    return env


@pytest.mark.parametrize(("sig", "isolate"), [(signal.SIGTERM, "--isolate"),
                                              # the same path as SIGTERM: nightly
                                              pytest.param(signal.SIGHUP, "--isolate",
                                                           marks=pytest.mark.nightly),
                                              # in-process: the same writing and
                                              # resume, per push by SIGTERM: nightly
                                              pytest.param(signal.SIGINT, "--no-isolate",
                                                           marks=pytest.mark.nightly)],
                         ids=["SIGTERM", "SIGHUP", "SIGINT-in-process"])
def test_a_signal_after_the_first_failure_writes_everything_and_resume_completes(tmp_path, sig,
                                                                                  isolate):
    corpus, out, xml = tmp_path / "corpus", tmp_path / "r.json", tmp_path / "r.xml"
    proc = subprocess.Popen(
        _command("--corpus", str(corpus), "--corpus-write", "--json", str(out),
                 "--junit", str(xml), isolate),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=ROOT)
    seen = []
    assert proc.stdout is not None
    deadline = time.monotonic() + 240
    for line in proc.stdout:
        seen.append(line)
        if "first failing example" in line:
            proc.send_signal(sig)
            break
        assert time.monotonic() < deadline, "".join(seen)
    rest, err = proc.communicate(timeout=120)
    text = "".join(seen) + rest
    assert proc.returncode == EXIT_INTERRUPTED, text + err
    last = [line for line in text.splitlines() if line.startswith("INTERRUPTED by")]
    assert last and last[-1].startswith(
        f"INTERRUPTED by {sig.name}: 1 units finished, 1 interrupted, 0 not started"), text
    assert "Traceback" not in err, err[-3000:]

    doc = json.loads(out.read_text())
    jsonschema.validate(doc, json.loads(results.SCHEMA_PATH.read_text()))
    verdicts = {r["property"]: r for r in doc["properties"]}
    assert verdicts["deterministic"]["verdict"] in ("PASS", "SKIP")
    stopped = verdicts["matches-reference"]
    assert stopped["verdict"] == "INTERRUPTED" and stopped["examples"] >= 1
    assert stopped["failure"] is not None and f"by {sig.name}" in stopped["reason"]
    assert doc["interrupted"] == {"signal": sig.name, "not_started": []}
    assert doc["summary"]["interrupted"] == 1 and doc["summary"]["ok"] is False
    cases = [c for suite in JUnitXml.fromfile(str(xml)) for c in suite]
    assert sorted(c.name for c in cases) == ["deterministic", "matches-reference"]
    (entry,) = open_corpus(str(corpus), writable=False).entries("toy", "matches-reference")
    assert entry.case["length"] == 8

    # --resume: the finished unit is kept, the interrupted one runs (its stored failure
    # replays first and fails again), one document holds both.
    again = subprocess.run(
        _command("--corpus", str(corpus), "--resume", str(out), "--json", str(out),
                 "--shrink-budget", "0"),
        capture_output=True, text=True, timeout=240, env=_env(), cwd=ROOT)
    assert again.returncode == 1, again.stdout + again.stderr
    assert "1 finished units kept, 1 to run" in again.stdout
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, json.loads(results.SCHEMA_PATH.read_text()))
    assert [r["property"] for r in doc["properties"]] == ["deterministic", "matches-reference"]
    assert doc["properties"][0] == verdicts["deterministic"]
    assert doc["properties"][1]["verdict"] == "FAIL" and "interrupted" not in doc
