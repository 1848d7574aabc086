"""A failure that does not recur when its example runs again is a FLAKY verdict (issue 55,
item 9): ``check`` reports it like any failure (one FLAKY line first, both runs, the
reproduce command; the JSON's failure record), exit 1, and the printed reproduce command
replays it to the same FLAKY verdict instead of Hypothesis's FlakyFailure traceback.

The planted implementation (``tests.helpers.flaky_softmax``) doubles the Pallas softmax's
result on its first run after ``arm()``: the ``deterministic`` property's first example
differs between its two runs, and Hypothesis's replay of it passes."""

from __future__ import annotations

import json
import shlex

import jsonschema
import pytest

from kernel_harness import cli
from kernel_harness.ops.softmax.cases import SoftmaxCase
from kernel_harness.orchestration import results
from tests.helpers import flaky_softmax

IMPL = "tests.helpers.flaky_softmax:wrong_once"
CASE = SoftmaxCase(dtype="float32", seed=1, leading=(2,), n=16)


@pytest.fixture
def armed():
    flaky_softmax.arm()
    yield
    flaky_softmax.arm()


def _after(out: str, header: str) -> list[str]:
    """The lines of ``out`` after the line ``header``."""
    lines = out.splitlines()
    return lines[lines.index(header) + 1:]


@pytest.mark.triton_ops
def test_check_says_flaky_with_both_runs_and_a_repro_in_text_and_json(armed, capsys, tmp_path):
    path = tmp_path / "r.json"
    code = cli.main(["check", "--no-isolate", "gpu-softmax", "--profile", "dev", "--seed", "1",
                     "--property", "deterministic", "--max-examples", "2", "--impl", IMPL,
                     "--shrink-budget", "0", "--json", str(path)])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "Traceback" not in out and "FlakyFailure" not in out, out
    assert "no smaller failing case" not in out, out
    report = _after(out, "=== gpu-softmax / deterministic FLAKY on interpret ===")
    assert report[0].startswith("[kernel-harness] FLAKY gpu-softmax deterministic float32 "), out
    assert "the failure does not recur" in report[0], report[0]
    assert report[1].startswith("  failing run: [kernel-harness] FAIL gpu-softmax "
                                "deterministic "), out
    assert ": out: rerunning changed " in report[1], report[1]
    assert any(line.startswith("  run again:   PASS") for line in report), out
    reproduce = [line for line in report if line.startswith("  reproduce: ")]
    assert len(reproduce) == 1, out
    row = next(line for line in out.splitlines() if line.startswith("gpu-softmax  determ"))
    assert row.split()[-1] == "FLAKY", row
    assert out.rstrip().endswith("FAIL: 0/1 properties passed on backend interpret"), out

    doc = json.loads(path.read_text())
    jsonschema.validate(doc, json.loads(results.SCHEMA_PATH.read_text()))
    (record,) = doc["properties"]
    assert record["verdict"] == "FLAKY" and doc["summary"]["flaky"] == 1
    assert doc["summary"]["ok"] is False and doc["summary"]["fail"] == 0
    failure = record["failure"]
    assert failure["repro"] == reproduce[0].removeprefix("  reproduce: ")
    assert failure["repro"].startswith(f"kernel-harness repro gpu-softmax --backend interpret "
                                       f"--case {shlex.quote(failure['case_json'])} "
                                       f"--impl {IMPL} --property deterministic --draws ")
    assert failure["summary"][0] == report[0]
    assert failure["flaky"]["run_again"].startswith("PASS")
    assert failure["flaky"]["failing_run"].startswith("[kernel-harness] FAIL gpu-softmax")
    assert record["error"]["message"].splitlines()[0] == report[0]


@pytest.mark.triton_ops
def test_the_printed_metamorphic_repro_replays_as_flaky_not_a_traceback(armed, capsys):
    code = cli.main(["repro", "gpu-softmax", "--case", CASE.to_json(), "--impl", IMPL,
                     "--property", "deterministic", "--draws", "[]"])
    out = capsys.readouterr().out
    assert code == 1, out
    lines = out.splitlines()
    assert lines[0].startswith("[kernel-harness] FLAKY gpu-softmax deterministic float32 "), out
    assert "Traceback" not in out and "FlakyFailure" not in out, out
    assert "  run again:   PASS (the property held on the same example)" in lines, out
    assert lines[-1] == ("  reproduce: kernel-harness repro gpu-softmax --backend interpret "
                         f"--case {shlex.quote(CASE.to_json())} --impl {IMPL} "
                         "--property deterministic --draws '[]'"), out


@pytest.mark.triton_ops
def test_a_matches_reference_repro_that_passes_when_run_again_is_flaky(armed, capsys):
    args = ["repro", "gpu-softmax", "--case", CASE.to_json(), "--impl", IMPL]
    assert cli.main(args) == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("[kernel-harness] FLAKY gpu-softmax matches-reference "), out
    assert lines[1].startswith("  failing run: [kernel-harness] FAIL gpu-softmax out "), out
    again = next(line for line in lines if line.startswith("  run again:   "))
    assert again.startswith("  run again:   PASS (every output within its tolerance: out "
                            "max rel err "), again
    assert flaky_softmax.runs() >= 2
    # Disarmed, the implementation is right every time: the same case passes, no FLAKY.
    assert cli.main(args) == 0
    assert capsys.readouterr().out.startswith("PASS gpu-softmax on interpret")
