"""The kernel-harness CLI: exit codes, one-line errors, summary, failure report, repro."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_harness import cli
from kernel_harness.records import registry

TOY = "tests.helpers.toy_family:FAMILY"


@pytest.fixture
def toy_registry(monkeypatch):
    monkeypatch.setitem(registry.BUILTIN_FAMILIES, "toy", TOY)


def _run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["check", "nosuch"], "unknown family 'nosuch'; known families:"),
        (["check", "toy", "--backend", "cuda"], "unknown backend 'cuda'; choose one of"),
        (["check", "toy", "--profile", "weekly"], "unknown profile 'weekly'; choose one of"),
        (["check", "toy", "--impl", "no_such_module_xyz:f"], "cannot import 'no_such_module_xyz'"),
        (["check", "toy", "--impl", "math:nope"], "module 'math' has no 'nope'"),
        (["check", "toy", "--impl", "math:pi"], "'pi' is a float, not callable"),
        (["check", "toy", "--impl", "math"], "--impl must look like MODULE:ATTR"),
        (["check", "toy", "--backend", "tpu-interpret"], "cannot run on backend 'tpu-interpret'"),
        (["repro", "toy", "--case", "{not json"], "--case: case is not valid JSON"),
    ],
)
def test_bad_input_is_one_line_on_stderr_exit_2(capsys, toy_registry, argv, message):
    code, out, err = _run(capsys, *argv)
    assert code == 2
    assert err.count("\n") == 1 and message in err, err
    assert "Traceback" not in err + out


def test_unavailable_accelerator_backend_is_an_error_not_a_substitute(capsys, toy_registry):
    from kernel_harness.core.backends import availability

    if availability()["gpu"] is None:
        pytest.skip("a GPU is attached")
    code, _, err = _run(capsys, "check", "--no-isolate", "toy", "--backend", "gpu")
    assert code == 2 and "backend 'gpu' is not available: no GPU" in err


def test_passing_check_prints_summary_and_exits_0(capsys, toy_registry):
    code, out, _ = _run(capsys, "check", "--no-isolate",
                        "toy", "--profile", "ci", "--max-examples", "5")
    assert code == 0, out
    assert "backend interpret (the default)" in out
    assert "cases reached by toy" in out and "length=" in out
    summary = [line for line in out.splitlines() if line.startswith("toy ")]
    (reference_row,) = [line for line in summary if "matches-reference" in line]
    assert reference_row.split()[-1] == "PASS"
    assert out.rstrip().endswith("2/2 properties passed on backend interpret")  # + deterministic


def test_planted_bug_fails_with_summary_detail_and_repro(capsys, toy_registry):
    code, out, _ = _run(
        capsys, "check", "--no-isolate", "toy", "--profile", "ci", "--max-examples", "5",
        "--impl", "tests.helpers.toy_family:wrong_softplus",
    )
    assert code == 1
    first = next(line for line in out.splitlines() if "FAIL toy" in line)
    assert "[kernel-harness] FAIL toy y float32 x=(" in first and "backend=interpret" in first
    assert "at index=" in first
    assert "reproduce: kernel-harness repro toy --backend interpret --case" in out
    repro = next(line for line in out.splitlines() if "reproduce:" in line)
    case_json = repro.split("--case ")[1].split(" --impl")[0].strip("'")
    assert json.loads(case_json)["length"] in (4, 8)
    # The printed command reruns the same failing case.
    code, out, _ = _run(
        capsys, "repro", "toy", "--case", case_json,
        "--impl", "tests.helpers.toy_family:wrong_softplus"
    )
    assert code == 1 and "FAIL toy y" in out
    code, out, _ = _run(capsys, "repro", "toy", "--case", case_json)
    assert code == 0 and out.startswith("PASS toy")


def test_impl_needs_exactly_one_family(capsys, toy_registry, monkeypatch):
    monkeypatch.setitem(registry.BUILTIN_FAMILIES, "toy2", TOY)
    code, _, err = _run(capsys, "check", "--no-isolate", "toy", "toy2",
                        "--impl", "tests.helpers.toy_family:softplus")
    assert code == 2 and "name exactly one family" in err


def test_console_script_bad_input_has_no_traceback():
    proc = subprocess.run(
        [sys.executable, "-m", "kernel_harness.cli", "check", "nosuch"],
        capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("kernel-harness: error: unknown family 'nosuch'")
    assert "Traceback" not in proc.stderr


def test_the_header_says_where_the_backend_came_from(capsys, toy_registry, tmp_path,
                                                      monkeypatch):
    argv = ["check", "--no-isolate", "toy", "--max-examples", "2",
            "--property", "matches-reference"]
    code, out, _ = _run(capsys, *argv, "--backend", "interpret")
    assert code == 0 and "backend interpret (from --backend), profile dev" in out
    (tmp_path / "pyproject.toml").write_text('[tool.kernel-harness]\nbackend = "interpret"\n')
    monkeypatch.chdir(tmp_path)
    code, out, _ = _run(capsys, *argv)
    assert code == 0, out
    assert (f"backend interpret (from backend in {tmp_path / 'pyproject.toml'} "
            "[tool.kernel-harness]), profile dev") in out


@pytest.mark.parametrize("attr, line", [
    ("off_by_a_hundredth", "  family:   toy   impl: tests.helpers.toy_impls:off_by_a_hundredth"),
    ("crashes_always", "  impl:     tests.helpers.toy_impls:crashes_always"),
])
def test_the_report_names_a_factory_made_impl_by_the_spec_given(capsys, toy_registry, attr,
                                                                line):
    spec = f"tests.helpers.toy_impls:{attr}"
    code, out, _ = _run(capsys, "check", "--no-isolate", "toy", "--max-examples", "2",
                        "--property", "matches-reference", "--shrink-budget", "0",
                        "--impl", spec)
    assert code == 1, out
    assert line in out.splitlines(), out
    assert "<locals>" not in out
    assert f"--impl {spec}" in next(x for x in out.splitlines() if "reproduce:" in x)


def test_a_check_leaves_no_example_database_in_the_users_folder(tmp_path):
    # A process of its own: this suite's conftest loads a profile without a database, which
    # the harness's profiles would inherit here; a user's process has Hypothesis's default.
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    for profile in ("dev", "nightly"):  # ci never kept one
        proc = subprocess.run(
            [sys.executable, "-m", "kernel_harness.cli", "check", "toy", "--family-module",
             "tests.helpers.toy_family", "--no-isolate", "--profile", profile,
             "--max-examples", "2", "--property", "matches-reference", "--impl",
             "tests.helpers.toy_family:wrong_softplus", "--shrink-budget", "0",
             "--timeout", "0", "--compile-cache", "off"],
            cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
        assert proc.returncode == 1, proc.stdout + proc.stderr  # a failure: it would be saved
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [["check", "--family", "toy"], ["--family=toy", "check"],
                                  ["mutate", "--family", "toy"]])
def test_a_family_option_is_a_clear_error_not_a_family_module(capsys, argv):
    # argparse once read --family as an abbreviation of --family-module and tried to import
    # a module named like the family.
    with pytest.raises(SystemExit) as exc:
        cli.parse_args(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--family is not an option: name the families as arguments" in err
    assert "cannot import" not in err
