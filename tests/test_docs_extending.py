"""docs/extending.md runs: its files are written into an empty folder and its commands run
on them as a user runs them (the new op's family passes; its planted bug fails; its relation,
mutants and bad-input list work), and it describes every field of ``Family`` and of
``Metamorphic`` (issue 41 item 1: documented extension points that cannot drift)."""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_harness.records.family import Family
from kernel_harness.records.hooks import Metamorphic

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "extending.md").read_text()
BLOCKS = re.findall(r"```(python|bash)\n(.*?)```", PAGE, re.S)
FILES = {m.group(1): body for lang, body in BLOCKS if lang == "python"
         for m in [re.match(r"# file: (\S+)\n", body)] if m}
COMMANDS = [line for lang, body in BLOCKS if lang == "bash"
            for line in body.strip().splitlines() if line.startswith("kernel-harness ")]
#: The exit status each documented command must have (1: the planted bug's FAIL).
EXPECTED = {"--impl ropekern:rope_written_for_32": 1}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    where = tmp_path_factory.mktemp("extending")
    for name, body in FILES.items():
        (where / name).write_text(body)
    return where


def _env(folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KH_")}
    env["PYTHONPATH"] = str(folder)
    return env


def test_the_page_has_its_files_and_commands():
    assert {"ropekern.py", "rope_family.py", "pieces.py", "rope_relations.py",
            "rope_mutants.py", "rope_bad_inputs.py"} <= set(FILES)
    assert len(COMMANDS) >= 5 and PRISTINE in COMMANDS
    family = FILES["rope_family.py"].splitlines()
    assert len(family) <= 40, len(family)


#: The documented command that checks the new op's pristine family on every property: nightly
#: (docs/ci.md); per push its planted bug's command imports and runs the same family files,
#: and tests/ops/test_rowwise.py checks a user op of 40 lines on the generic properties.
PRISTINE = "kernel-harness --family-module rope_family check rope --profile dev"


@pytest.mark.parametrize("command", [
    pytest.param(c, id=c.split()[3] + ":" + c.split()[-1],
                 marks=[pytest.mark.nightly] if c == PRISTINE else [])
    for c in COMMANDS])
def test_each_documented_command_runs(folder, command):
    args = shlex.split(command)[1:]
    if args[2] == "check":
        args += ["--seed", "1", "--max-examples", "6", "--shrink-budget", "0"]
    if args[2] == "mutate":  # the rope family's own check passes in the test above
        args += ["--skip-control", "--max-examples", "6"]
    proc = subprocess.run([sys.executable, "-m", "kernel_harness.cli", *args], cwd=folder,
                          env=_env(folder), capture_output=True, text=True, timeout=600)
    want = next((code for key, code in EXPECTED.items() if key in command), 0)
    assert proc.returncode == want, (proc.stdout + proc.stderr)[-4000:]
    assert "Traceback" not in proc.stderr


def test_the_pieces_example_runs(folder):
    proc = subprocess.run([sys.executable, "pieces.py"], cwd=folder, env=_env(folder),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("record", [Family, Metamorphic])
def test_every_field_is_described(record):
    missing = [f.name for f in dataclasses.fields(record) if f"| `{f.name}` |" not in PAGE]
    assert not missing, f"docs/extending.md does not describe {record.__name__}: {missing}"


def test_the_chunked_recurrence_excerpts_are_the_example():
    """The section "A chunked recurrence" quotes ``examples/chunked_delta_rule.py`` (which
    tests/examples/test_chunked_delta_rule_example.py runs): each of its python blocks is
    that file's text, verbatim, so the page cannot drift from the code CI runs."""
    section = PAGE.split("## A chunked recurrence\n", 1)[1].split("\n## ", 1)[0]
    excerpts = re.findall(r"```python\n(.*?)```", section, re.S)
    example = (ROOT / "examples" / "chunked_delta_rule.py").read_text()
    assert len(excerpts) >= 4
    for excerpt in excerpts:
        assert excerpt in example, excerpt
    assert "examples.chunked_delta_rule:resets_inside_chunks_only" in section
