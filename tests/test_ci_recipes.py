"""The CI recipes in ``.github/workflows`` stay true: each parses as YAML with the jobs a team
needs, and every ``kernel-harness`` command in them (and in ``.ci/run``) is a valid command
line of the current CLI parser."""

from __future__ import annotations

import importlib.util
import re
import shlex
import sys
from pathlib import Path

import pytest
import yaml

from kernel_harness import cli
from kernel_harness.records import registry
from kernel_harness.regression import mutate

#: The nightly TPU workflow's shards (the fourth: libraries that need Python >= 3.12).
SHARDS = 4

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("rehearse_nightly",
                                               ROOT / ".ci" / "rehearse_nightly.py")
rehearse = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rehearse)
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
#: A ``kernel-harness`` call, after a shell separator and any ``VAR=value`` prefixes.
COMMAND = re.compile(r"(?:^|&&|\|\||;|\|)\s*(?:[A-Z_][A-Z0-9_]*=(?:\"[^\"]*\"|\S*)\s+)*"
                     r"(?:\S*/)?kernel-harness\s+([^&|;]*)")


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


def _run_scripts(path: Path, jobs: tuple[str, ...] = ()) -> list[str]:
    """The ``run`` scripts of a workflow as the runner executes them: once per matrix entry
    with ``${{ matrix.* }}`` filled in, and the workflow's own ``KH_*`` variables expanded."""
    doc = yaml.safe_load(path.read_text())
    env = {k: str(v) for k, v in doc.get("env", {}).items()}
    scripts = []
    for name, job in doc["jobs"].items():
        if jobs and name not in jobs:
            continue
        for entry in rehearse.matrix_entries(job, {}):
            for step in job["steps"]:
                if "run" in step:
                    text = rehearse.fill(step["run"], entry)
                    scripts.append(re.sub(r"\$\{?(KH_\w+)\}?",
                                          lambda m: env.get(m.group(1), m.group(0)), text))
    return scripts


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


NIGHTLY = ROOT / ".github/workflows/nightly-tpu.yml"


def test_nightly_is_hang_proof_and_uploads_its_results():
    doc = yaml.safe_load(NIGHTLY.read_text())
    checks = [cli.parse_args(c) for s in _run_scripts(NIGHTLY) for c in _commands(s)
              if c[0] == "check"]
    assert len(checks) == len(doc["jobs"]["tpu"]["strategy"]["matrix"]["include"]) == SHARDS
    for check in checks:
        assert check.backend == "tpu" and check.profile == "nightly" and check.timeout > 0
        assert check.seed is None and check.max_examples is None  # 300 fresh examples a night
    # every shard writes its own results where the verdict job's merge reads them
    assert len({c.json for c in checks}) == SHARDS and all(
        c.json.match("results/nightly-*.json") for c in checks)
    for job in doc["jobs"].values():
        upload = [s for s in job["steps"]
                  if s.get("uses", "").startswith("actions/upload-artifact")]
        assert upload and upload[0]["if"] == "always()"


def test_nightly_compares_goldens_and_gives_one_verdict():
    doc = yaml.safe_load(NIGHTLY.read_text())
    goldens = [cli.parse_args(c) for s in _run_scripts(NIGHTLY) for c in _commands(s)
               if c[:2] == ["golden", "check"]]
    assert [g.backend for g in goldens] == ["tpu"] * SHARDS
    verdict = doc["jobs"]["verdict"]
    assert verdict["needs"] == "tpu" and verdict["if"] == "always()"
    (merge,) = [cli.parse_args(c) for s in _run_scripts(NIGHTLY, ("verdict",))
                for c in _commands(s)]
    assert merge.command == "merge" and [str(p) for p in merge.inputs] == [
        "results/nightly-*.json"]
    assert merge.json is not None and merge.junit is not None


def test_the_nightly_shards_cover_every_tpu_family_once():
    include = yaml.safe_load(NIGHTLY.read_text())["jobs"]["tpu"]["strategy"]["matrix"][
        "include"]
    listed = [f for e in include for f in e["families"].split()]
    # "tpu" in its declared backends (Adapter.backends: what it runs on where its
    # requirements are met), not only where this stack meets them (the hd64 RPA needs jax
    # >= 0.11, the TPU host's) nor where this Python cannot install its library (flywheel-tpu
    # and deltanet-tpu need Python >= 3.12: their shard's venv is the host's python3.12)
    on_tpu = sorted(n for n in registry.family_names()
                    if "tpu" in registry.get_family(n).backends
                    or n == "tpu-inference-rpa-v3-hd64"
                    or (sys.version_info < (3, 12)
                        and "Python >= 3.12" in registry.get_family(n).requires))
    assert sorted(listed) == on_tpu, "a family that runs on a TPU belongs to exactly one shard"


def test_the_rehearsal_refuses_what_it_cannot_rehearse_honestly():
    with pytest.raises(rehearse.RecipeError, match="cannot fill in"):
        rehearse.fill("kernel-harness check ${{ secrets.TOKEN }}", {})
    with pytest.raises(rehearse.RecipeError, match="does not override"):
        rehearse.environment({"env": {"KH_NEW": "x"}}, {}, {})
    job = {"strategy": {"matrix": {"include": [{"shard": 1, "families": "a b"}]}}}
    assert rehearse.matrix_entries(job, {"1": "c"}) == [{"shard": "1", "families": "c"}]
    with pytest.raises(rehearse.RecipeError, match="shards the matrix lacks"):
        rehearse.matrix_entries(job, {"3": "c"})
    assert rehearse.job_order({"b": {"needs": "a"}, "a": {}}) == ["a", "b"]


def test_the_nightly_job_rehearses_the_nightly_recipe():
    """Per push until 2026-12-06 (``.ci/run``); now a step of the scheduled nightly-tests
    job, on the first stack's venv, with every shard's family named."""
    doc = yaml.safe_load((ROOT / ".github/workflows/ci.yml").read_text())
    steps = doc["jobs"]["nightly-tests"]["steps"]
    runs = [s.get("run", "") for s in steps]
    rehearsal = [r for r in runs if ".venv/bin/python .ci/rehearse_nightly.py" in r]
    assert len(rehearsal) == 1, runs
    assert all(f"--families {i}=" in rehearsal[0] for i in range(1, SHARDS + 1)), rehearsal
    assert ".venv/bin/python .ci/rehearse_nightly.py" not in (ROOT / ".ci" / "run").read_text()


def test_gate_runs_on_kernel_changes():
    doc = yaml.safe_load((ROOT / ".github/workflows/kernel-gate.yml").read_text())
    on = doc.get("on") or doc[True]
    assert "kernel_harness/kernels/**" in on["pull_request"]["paths"]
    commands = [c for s in _run_scripts(ROOT / ".github/workflows/kernel-gate.yml")
                for c in _commands(s)]
    assert any(c[0] == "gate" for c in commands)


def test_ci_run_commands_parse_too():
    commands = _commands((ROOT / ".ci" / "run").read_text())
    assert ["list"] in commands and any(c[:2] == ["golden", "check"] for c in commands)
    for argv in commands:
        cli.parse_args(argv)


def test_a_stale_command_is_caught():
    with pytest.raises(SystemExit):
        cli.parse_args(_commands("kernel-harness check --no-such-flag")[0])


def test_the_accelerator_script_parses_and_runs_what_a_gpu_host_needs():
    import subprocess

    script = ROOT / "scripts" / "accelerator-check.sh"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    text = script.read_text()
    assert "pip install --no-deps --no-build-isolation --no-index -q -e ." in text
    assert 'FAMILIES="gpu-mha gpu-decode gpu-paged gpu-norm gpu-softmax sdpa"' in text
    # With the jax without its Pallas Triton ops (>= 0.12.1) the gpu-* families have no
    # backend here; their requires says so, and the script still lists them.
    gpu_families = sorted(n for n in registry.family_names()
                          if "gpu" in registry.get_family(n).backends
                          or "removed its Pallas Triton ops" in registry.get_family(n).requires)
    assert sorted(text.split('FAMILIES="')[1].split('"')[0].split()) == gpu_families
    assert "set -e" not in text  # one failing step never stops the next


def test_the_nightly_kill_matrices_cover_every_catalog_and_only_those():
    """ci.yml's kill-matrices job lists its families by hand (a workflow cannot import the
    registry); every built-in family with a mutant catalog (``<package>.mutants``) is there."""
    doc = yaml.safe_load((ROOT / ".github/workflows/ci.yml").read_text())
    job = doc["jobs"]["kill-matrices"]
    listed = sorted(e["family"] for e in job["strategy"]["matrix"]["include"])
    assert listed == sorted(mutate.families_with_catalogs())
    kill = " ".join(job["steps"][-1]["run"].split())
    assert "mutate ${{ matrix.family }} --first-kill --profile ci" in kill
