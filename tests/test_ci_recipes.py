"""The CI recipes in ``.github/workflows`` stay true: each parses as YAML with the jobs a team
needs, and every ``kernel-harness`` command in them (and in ``.ci/run``) is a valid command
line of the current CLI parser."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from kernel_harness import cli

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
COMMAND = re.compile(r"(?:^|&&|\|\||;|\|)\s*(?:\S*/)?kernel-harness\s+([^&|;]*)")


def _commands(script: str) -> list[list[str]]:
    """The argument lists of every ``kernel-harness`` call in a shell script."""
    joined = re.sub(r"\\\n\s*", " ", script)
    found = []
    for line in joined.splitlines():
        line = line.split(" #")[0]
        for match in COMMAND.finditer(line.strip()):
            found.append(_without_redirections(shlex.split(match.group(1))))
    return found


def _without_redirections(tokens: list[str]) -> list[str]:
    out, skip = [], False
    for t in tokens:
        if skip:
            skip = False
        elif t in (">", ">>", "2>", "<"):
            skip = True
        elif not re.match(r"^\d?>", t):
            out.append(t)
    return out


def _run_scripts(path: Path) -> list[str]:
    doc = yaml.safe_load(path.read_text())
    return [step["run"] for job in doc["jobs"].values() for step in job["steps"] if "run" in step]


def test_the_three_recipes_exist():
    names = {p.stem for p in WORKFLOWS}
    assert {"ci", "nightly-tpu", "kernel-gate"} <= names, names


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_every_kernel_harness_command_parses(path):
    doc = yaml.safe_load(path.read_text())
    assert doc["jobs"] and (doc.get("on") or doc.get(True)), "a workflow needs triggers and jobs"
    for job in doc["jobs"].values():
        assert job.get("timeout-minutes"), f"{path.name}: every job needs a time limit"
    commands = [c for s in _run_scripts(path) for c in _commands(s)]
    assert commands, f"{path.name} runs no kernel-harness command"
    for argv in commands:
        cli.parse_args(argv)  # SystemExit (argparse's error) fails the test


def test_nightly_is_hang_proof_and_uploads_its_results():
    doc = yaml.safe_load((ROOT / ".github/workflows/nightly-tpu.yml").read_text())
    (job,) = doc["jobs"].values()
    checks = [cli.parse_args(c) for s in _run_scripts(ROOT / ".github/workflows/nightly-tpu.yml")
              for c in _commands(s) if c[0] == "check"]
    (check,) = checks
    assert check.backend == "tpu" and check.profile == "nightly" and check.timeout > 0
    assert check.json is not None
    upload = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact")]
    assert upload and upload[0]["if"] == "always()"


def test_gate_runs_on_kernel_changes():
    doc = yaml.safe_load((ROOT / ".github/workflows/kernel-gate.yml").read_text())
    on = doc.get("on") or doc[True]
    assert "kernel_harness/kernels/**" in on["pull_request"]["paths"]
    commands = [c for s in _run_scripts(ROOT / ".github/workflows/kernel-gate.yml")
                for c in _commands(s)]
    assert any(c[0] == "gate" for c in commands)


def test_ci_run_commands_parse_too():
    commands = _commands((ROOT / ".ci" / "run").read_text())
    assert any(c[:2] == ["check", "rmsnorm"] for c in commands)
    for argv in commands:
        cli.parse_args(argv)


def test_a_stale_command_is_caught():
    with pytest.raises(SystemExit):
        cli.parse_args(_commands("kernel-harness check --no-such-flag")[0])
