"""Resuming an interrupted run is the session's (issue 54): ``check --resume``,
``kernel_harness.testing.check(resume=...)`` and ``pytest --kh-resume`` keep the finished
units of the interrupted run's JSON and run only the others; a kept FAIL stays a FAIL."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_harness import testing
from kernel_harness.cli import main
from kernel_harness.records import registry
from tests.helpers.toy_family import FAMILY
from tests.orchestration.test_session import _env

ROOT = Path(__file__).resolve().parents[2]
COMMON = ["--profile", "ci", "--max-examples", "2", "--no-isolate"]
PROPS = ["deterministic", "matches-reference"]


@pytest.fixture
def interrupted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A toy run's JSON whose second unit a signal interrupted (as the interrupt writes it)."""
    monkeypatch.setattr(registry, "_from_modules", {})
    monkeypatch.setattr(registry, "_loaded_modules", set())
    out = tmp_path / "run.json"
    assert main(["check", "toy", "--family-module", "tests.helpers.toy_family", *COMMON,
                 *(a for p in PROPS for a in ("--property", p)), "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert [r["property"] for r in doc["properties"]] == PROPS
    doc["properties"][1]["verdict"] = "INTERRUPTED"
    out.write_text(json.dumps(doc))
    return out


def test_testing_check_resumes(interrupted: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = testing.check(FAMILY, profile="ci", properties=PROPS, max_examples=2,
                           resume=str(interrupted))
    assert [(r.prop, r.verdict) for r in result.results] == [
        ("deterministic", "PASS"), ("matches-reference", "PASS")]
    assert "from --resume" in result.results[0].line and result.results[1].record["examples"]
    assert "1 finished units kept, 1 to run" in capsys.readouterr().out


def test_pytest_resumes_and_a_kept_failure_fails(interrupted: Path, tmp_path: Path) -> None:
    doc = json.loads(interrupted.read_text())
    doc["properties"][0]["verdict"] = "FAIL"
    interrupted.write_text(json.dumps(doc))
    args = ["--kh-check", "toy", "--kh-family-module", "tests.helpers.toy_family",
            "--kh-profile", "ci", "--kh-max-examples", "2",
            *(a for p in PROPS for a in ("--kh-property", p)), "--kh-resume", str(interrupted)]
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", "-p",
                           "no:cacheprovider", "-rA", *args], capture_output=True, text=True,
                          timeout=600, env=_env(), cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "PASSED kernel-harness::toy::matches-reference" in proc.stdout
    assert "FAILED kernel-harness::toy::deterministic" in proc.stdout
    assert "from --resume" in proc.stdout
