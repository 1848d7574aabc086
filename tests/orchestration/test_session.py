"""The check session under its front ends: a native crash is a report and the run goes on
(with and without --timeout), an impossible --impl signature is a usage error within
seconds, and pytest --kh-check / kernel_harness.testing.check report like the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernel_harness.records import registry

ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != registry.FAMILY_MODULES_ENV}
    env["PYTHONPATH"] = str(ROOT)
    return env


def _check(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kernel_harness.cli", "check", *args],
                          capture_output=True, text=True, timeout=600, env=_env(), cwd=cwd)


# Under --timeout the same isolated worker runs the property (nightly).
@pytest.mark.parametrize("timeout", [
    pytest.param([], id="isolated"),
    pytest.param(["--timeout", "60"], id="timeout", marks=pytest.mark.nightly),
])
def test_a_native_crash_is_a_report_and_the_next_family_runs(tmp_path, timeout):
    out = tmp_path / "r.json"
    proc = _check("toy-segfault", "toy-abort", "toy", "--family-module",
                  "tests.helpers.crashing_impls", "--profile", "ci", "--property",
                  "matches-reference", "--max-examples", "3", "--json", str(out), *timeout)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    records = {r["family"]: r for r in json.loads(out.read_text())["properties"]}
    assert records["toy"]["verdict"] == "PASS"
    for fam, sig in (("toy-segfault", "SIGSEGV"), ("toy-abort", "SIGABRT")):
        rec = records[fam]
        assert rec["verdict"] == "FAIL"
        assert sig in rec["failure"]["crash_signal"]
        assert rec["failure"]["repro"].startswith(f"kernel-harness repro {fam} ")
        assert "--family-module tests.helpers.crashing_impls" in rec["failure"]["repro"]
        assert f"=== {fam} / matches-reference CRASHED on interpret ===" in proc.stdout
        assert f"CRASH ({sig})" in proc.stdout  # the summary table names the signal
    # faulthandler's stack of the worker: the kernel's own line is in the report
    assert "crashing_impls.py" in proc.stdout


def test_a_crash_without_isolation_is_still_the_old_dead_process():
    """--no-isolate runs in this process: documented as the trade-off (no report)."""
    proc = _check("toy-segfault", "--family-module", "tests.helpers.crashing_impls",
                  "--profile", "ci", "--property", "matches-reference", "--max-examples", "3",
                  "--no-isolate")
    assert proc.returncode == -11, proc.returncode


def test_an_impl_that_cannot_take_the_call_is_a_usage_error_within_seconds():
    start = time.monotonic()
    proc = _check("toy", "--family-module", "tests.helpers.toy_family", "--impl",
                  "tests.helpers.crashing_impls:wrong_signature", "--max-examples", "3")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "missing a required argument: 'axis'" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert time.monotonic() - start < 60


def test_the_impl_is_named_in_the_text_output():
    proc = _check("toy", "--family-module", "tests.helpers.toy_family", "--impl",
                  "tests.helpers.toy_impls:within_noise", "--max-examples", "2", "--property",
                  "matches-reference", "--no-isolate")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "  impl: tests.helpers.toy_impls:within_noise" in proc.stdout


def _pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", "-p",
                           "no:cacheprovider", *args], capture_output=True, text=True,
                          timeout=600, env=_env(), cwd=tmp_path)


def test_pytest_kh_check_in_an_empty_directory_passes_and_fails_with_a_replayable_repro(
        tmp_path):
    common = ["--kh-check", "toy", "--kh-family-module", "tests.helpers.toy_family",
              "--kh-profile", "ci", "--kh-property", "matches-reference"]
    passed = _pytest(tmp_path, *common, "-rA")
    assert passed.returncode == 0, passed.stdout
    assert "PASSED kernel-harness::toy::matches-reference" in passed.stdout
    failed = _pytest(tmp_path, *common, "--kh-impl", "tests.helpers.toy_impls:off_by_a_thousandth")
    assert failed.returncode == 1, failed.stdout
    assert "[kernel-harness] FAIL toy y float32" in failed.stdout
    assert "hypothesis" not in failed.stdout.split("FAILURES")[1].split("Captured")[0].lower()
    (repro,) = {line.strip().removeprefix("reproduce: ") for line in failed.stdout.splitlines()
                if line.strip().startswith("reproduce: kernel-harness repro")}
    replay = subprocess.run(
        [sys.executable, "-c", "import sys, shlex; from kernel_harness.cli import main; "
         "raise SystemExit(main(shlex.split(sys.argv[1])[1:]))", repro],
        capture_output=True, text=True, timeout=300, env=_env(), cwd=tmp_path)
    assert replay.returncode == 1, replay.stdout + replay.stderr


TESTING_TEST = """
import pytest
import kernel_harness.testing
from tests.helpers.toy_family import FAMILY

def test_passes():
    result = kernel_harness.testing.check(FAMILY, profile="ci", properties=["matches-reference"])
    assert result.ok and result.ran[0].record["examples"] > 0

def test_fails_with_the_report():
    with pytest.raises(AssertionError) as info:
        kernel_harness.testing.check(FAMILY, profile="ci", properties=["matches-reference"],
                                     impl="tests.helpers.toy_impls:off_by_a_thousandth")
    text = str(info.value)
    assert text.startswith("FAIL: 0/1 properties passed")
    assert "[kernel-harness] FAIL toy y float32" in text
    assert "--family-module tests.helpers.toy_family" in text  # the repro finds the object
"""


def test_kernel_harness_testing_check_in_a_users_test(tmp_path):
    (tmp_path / "test_mine.py").write_text(TESTING_TEST)
    proc = _pytest(tmp_path, "test_mine.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_repro_of_a_crash_prints_the_crash_report_not_a_traceback():
    proc = subprocess.run(
        [sys.executable, "-m", "kernel_harness.cli", "--family-module", "tests.helpers.toy_family",
         "repro", "toy", "--case", '{"dtype":"float32","length":8,"seed":1}', "--impl",
         "tests.helpers.crashing_impls:raises"],
        capture_output=True, text=True, timeout=300, env=_env(), cwd=ROOT)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.startswith("[kernel-harness] CRASH toy float32 x=(8,) backend=interpret: "
                                  "NotImplementedError: lengths other than 4")
    assert "crashing_impls.py" in proc.stdout and "reproduce: kernel-harness repro" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


@pytest.mark.nightly  # corpus replay per push: test_corpus, test_corpus_redis
def test_a_failure_found_with_a_corpus_is_replayed_first_by_a_later_run(tmp_path):
    corpus = str(tmp_path / "corpus")
    base = ["toy", "--family-module", "tests.helpers.toy_family", "--property",
            "matches-reference"]
    bug = ["--impl", "tests.helpers.toy_impls:wrong_at_length_8"]
    found = _check(*base, *bug, "--profile", "dev", "--max-examples", "20", "--seed", "1",
                   "--corpus", corpus)
    assert found.returncode == 1 and "corpus: stored " in found.stdout, found.stdout
    later = [*base, *bug, "--profile", "ci", "--max-examples", "1", "--seed", "771"]
    assert _check(*later).returncode == 0  # the later run alone does not reach length 8
    again = _check(*later, "--corpus", corpus)
    assert again.returncode == 1 and "FAIL (corpus)" in again.stdout, again.stdout
    assert "reproduce: kernel-harness repro toy" in again.stdout
    assert _check(*base, "--profile", "ci", "--max-examples", "1", "--corpus",
                  corpus).returncode == 0  # the pristine kernel passes the replayed corpus
    # The gate reads the corpus too: the stored failure fails it again.
    gate = subprocess.run([sys.executable, "-m", "kernel_harness.cli", "gate", "toy",
                           "--family-module", "tests.helpers.toy_family", "--corpus", corpus,
                           *bug], capture_output=True, text=True, timeout=300, env=_env(),
                          cwd=ROOT)
    assert gate.returncode != 0 and "FAIL: toy: 1 of 1 stored failures fail again" in gate.stdout


def test_shards_run_every_unit_exactly_once(tmp_path):
    names = []
    # toy runs matches-reference only: shard 1 gets it (PASS), shard 2 only properties toy has
    # no hook for, so it compared nothing and is not green.
    for shard, code in (("1/2", 0), ("2/2", 1)):
        out = tmp_path / f"{shard[0]}.json"
        proc = _check("toy", "--family-module", "tests.helpers.toy_family", "--max-examples",
                      "1", "--shard", shard, "--json", str(out), "--no-isolate")
        assert proc.returncode == code, proc.stdout + proc.stderr
        assert f"shard {shard}: " in proc.stdout
        names.append([r["property"] for r in json.loads(out.read_text())["properties"]])
    from kernel_harness.checks.properties import PROPERTIES

    assert sorted(names[0] + names[1]) == sorted(PROPERTIES)
    assert not set(names[0]) & set(names[1])


def test_kernel_coverage_is_recorded_in_the_worker_process(tmp_path):
    import jsonschema

    from kernel_harness.orchestration import results

    out = tmp_path / "r.json"
    proc = _check("hstu", "--profile", "ci", "--property", "matches-reference",
                  "--max-examples", "1", "--kernel-coverage", "--json", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, json.loads(results.SCHEMA_PATH.read_text()))
    cov = doc["kernel_coverage"]
    assert cov["families"] == ["hstu"] and len(cov["kernels"]) >= 2 and cov["sites"]
    assert "units run in a worker process" in proc.stdout
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith("kernel coverage: ")]
    kernels = int(line.split("kernel coverage: ")[1].split(" ")[0])
    assert kernels >= 2 and " 0 seen" not in line, line  # hstu's forward and backward


# Nightly: kernel coverage is recorded per push
# (test_kernel_coverage_is_recorded_in_the_worker_process).
@pytest.mark.nightly
def test_pytest_kh_kernel_coverage_prints_the_table_after_the_summary(tmp_path):
    proc = _pytest(tmp_path, "--kh-check", "hstu", "--kh-property", "matches-reference",
                   "--kh-max-examples", "1", "--kh-kernel-coverage")
    assert proc.returncode == 0, proc.stdout
    assert "kernel-branch coverage of hstu:" in proc.stdout
    assert "kernel coverage: 2 kernel(s) (_bwd_kernel, _fwd_kernel)" in proc.stdout
