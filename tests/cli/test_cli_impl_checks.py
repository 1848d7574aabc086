"""Checking someone else's kernel from the CLI: --without / declared capabilities,
crash reports grouped by kind with a repro each, --tolerance marked everywhere."""

from pathlib import Path

import pytest

from kernel_harness import cli
from kernel_harness.records import registry

NARROW = "tests.helpers.toy_narrow"


@pytest.fixture(autouse=True)
def toy_registry(monkeypatch):
    monkeypatch.setitem(registry.BUILTIN_FAMILIES, "toy", "tests.helpers.toy_family:FAMILY")
    monkeypatch.setitem(registry.BUILTIN_FAMILIES, "toyopt", f"{NARROW}:FAMILY")


def _run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


CHECK = ["check", "--no-isolate", "toyopt", "--profile", "ci", "--max-examples", "12",
         "--property", "matches-reference"]


def test_declared_capabilities_pass_and_are_named_where_the_user_accepts_them(capsys):
    code, out, _ = _run(capsys, *CHECK, "--impl", f"{NARROW}:short_only", "--accept-declared")
    assert code == 0, out
    assert "toyopt: checked without: long" in out
    assert "length=8" not in out  # the events show nothing long ran


def test_an_implementation_does_not_narrow_its_own_check(capsys):
    """Issue 55: an impl declaring itself without a feature (and wrong, or failing, exactly
    there) is checked with it unless the user allows the declaration."""
    code, out, _ = _run(capsys, *CHECK, "--impl", f"{NARROW}:short_only")
    assert code == 1, out
    assert ("the implementation declares it lacks long: NOT left out (only the user narrows "
            "a check: --without long or --accept-declared)") in out
    assert "checked without" not in out
    assert "NotImplementedError: short_only: length 8 is not supported" in out


def test_without_on_the_command_line_is_the_same_declaration(capsys):
    code, out, _ = _run(capsys, *CHECK, "--impl", f"{NARROW}:short_only_undeclared",
                        "--without", "long")
    assert code == 0, out
    assert "checked without: long" in out


def test_unknown_feature_is_one_line_exit_2(capsys):
    code, out, err = _run(capsys, *CHECK, "--without", "lnog")
    assert code == 2 and "no optional feature lnog; known: long" in err


def test_undeclared_crash_is_a_fail_with_summary_frames_and_repro(capsys):
    code, out, _ = _run(capsys, *CHECK, "--impl", f"{NARROW}:short_only_undeclared")
    assert code == 1
    assert "--- crash kind 1 of 1: NotImplementedError at toy_narrow.py:" in out
    assert ("[kernel-harness] CRASH toyopt float32 x=(8,) backend=interpret: "
            "NotImplementedError: short_only: length 8 is not supported") in out
    assert "toy_narrow.py:" in out and "in short_only_undeclared" in out
    # One replay line as soon as the first crash is found, one in the final report.
    first, _, final = out.partition("=== toyopt / matches-reference FAILED")
    assert first.count("reproduce: kernel-harness repro toyopt") == 1
    assert final.count("reproduce: kernel-harness repro toyopt") == 1
    assert "watch.py" not in final  # harness frames are not the implementation's
    assert "Traceback" not in out and "ExceptionGroup" not in out
    row = next(line for line in out.splitlines() if line.startswith("toyopt"))
    cells = row.split()
    # family property backend examples checks passed failed rejected time verdict
    examples, passed, failed, rejected = (int(cells[i]) for i in (3, 5, 6, 7))
    assert examples == passed + failed and failed >= 1 and rejected == 0, row
    assert "FAIL (1 crash kind)" in row


def test_two_crash_kinds_are_two_reports_with_counts(capsys):
    """By default a property stops at its first failure (one kind is reported, the first
    replay line printed at once); --all-bugs keeps drawing and reports every kind."""
    code, out, _ = _run(capsys, *CHECK, "--impl", f"{NARROW}:two_crashes")
    assert code == 1 and "crash kind 1 of 1" in out
    code, out, _ = _run(capsys, *CHECK, "--impl", f"{NARROW}:two_crashes", "--all-bugs")
    assert code == 1
    assert "crash kind 1 of 2" in out and "crash kind 2 of 2" in out
    assert "NotImplementedError: two_crashes: length 8" in out and "TypeError" in out
    final = out.partition("=== toyopt / matches-reference FAILED")[2]
    assert final.count("reproduce: kernel-harness repro toyopt") == 2
    assert len(out.splitlines()) < 60, out  # not a dump of Hypothesis's ExceptionGroup


def test_tolerance_override_is_in_summary_and_repro_line(capsys):
    code, out, _ = _run(capsys, "check", "--no-isolate",
                        "toy", "--profile", "ci", "--max-examples", "3",
                        "--property", "matches-reference",
                        "--impl", "tests.helpers.toy_family:wrong_softplus",
                        "--tolerance", "dx=0.5", "--tolerance-scale", "2")
    assert code == 1  # y is 1% off: still far outside 2 x 1e-5
    marker = "tolerances NOT the family's defaults: --tolerance-scale 2 --tolerance dx=0.5"
    assert f"toy: {marker}" in out  # header and summary
    repro = next(line for line in out.splitlines() if "reproduce:" in line)
    assert repro.endswith("--tolerance-scale 2 --tolerance dx=0.5")
    assert "2e-05" in out  # the scaled y tolerance in the stats table


def test_repro_accepts_the_tolerance_flags(capsys):
    from tests.helpers.toy_family import ToyCase

    case = ToyCase(dtype="float32", seed=1, length=4).to_json()
    argv = ["repro", "toy", "--case", case, "--impl", "tests.helpers.toy_family:wrong_softplus"]
    code, out, _ = _run(capsys, *argv)
    assert code == 1
    code, out, _ = _run(capsys, *argv, "--tolerance", "y=0.05", "--tolerance", "dx=0.05")
    assert code == 0, out
    assert "NOT the family's defaults: --tolerance y=0.05 --tolerance dx=0.05" in out


@pytest.mark.parametrize("name", registry.family_names())
def test_describe_every_family(capsys, name):
    from kernel_harness.records.registry import get_family

    fam = get_family(name)
    code, out, _ = _run(capsys, "describe", name, "--samples", "2")
    assert code == 0
    assert out.startswith(f"{name}: {fam.summary}")
    assert fam.impl_signature[:40] in out.replace("\n    ", " ")
    for output in fam.output_axes:
        assert f"  {output} " in out
    for tol in fam.tolerances.entries.values():
        assert tol.reason[:30] in out
    assert "for example:" in out and "example adapter:" in out
    assert "--impl my_impl:my_kernel" in out


def test_describe_names_optional_features_and_list_prints_signatures(capsys):
    code, out, _ = _run(capsys, "describe", "sdpa", "--samples", "0")
    assert code == 0 and "  window           no local window" in out
    code, out, _ = _run(capsys, "list")
    assert code == 0 and "sdpa: impl(query, key, value, bias=None" in out


def test_without_in_the_configuration_narrows_every_run_and_says_so(capsys, tmp_path,
                                                                    monkeypatch):
    """[tool.kernel-harness] without: reported as --without is, naming the file."""
    import json

    import jsonschema

    from kernel_harness.orchestration import results

    (tmp_path / ".git").mkdir()
    (tmp_path / "pyproject.toml").write_text(
        '[tool.kernel-harness]\nwithout = {toyopt = ["long"], sdpa = ["bias"]}\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2]))
    out_json = tmp_path / "r.json"
    code, out, _ = _run(capsys, *CHECK, "--impl", f"{NARROW}:short_only_undeclared",
                        "--json", str(out_json))
    assert code == 0, out
    said = (f"checked without: long (from without in {(tmp_path / 'pyproject.toml').resolve()} "
            "[tool.kernel-harness])")
    assert f"  toyopt: {said}" in out.splitlines(), out  # the header
    assert f"toyopt: {said}" in out.splitlines(), out  # beside the verdict
    doc = json.loads(out_json.read_text())
    jsonschema.validate(doc, json.loads(results.SCHEMA_PATH.read_text()))
    assert doc["environment"]["adjustments"]["without_config"] == {"toyopt": ["long"]}
    code, out, _ = _run(capsys, *CHECK, "--impl", f"{NARROW}:short_only_undeclared",
                        "--without", "long")  # the command line adds to it
    assert code == 0 and f"toyopt: {said}" in out.splitlines(), out


def test_an_unknown_feature_in_the_configuration_names_the_file_and_the_known_ones(
        capsys, tmp_path, monkeypatch):
    (tmp_path / ".git").mkdir()
    (tmp_path / "pyproject.toml").write_text('[tool.kernel-harness]\nwithout = {toyopt = '
                                             '["lnog"]}\n')
    monkeypatch.chdir(tmp_path)
    code, out, err = _run(capsys, *CHECK)
    assert code == 2, out
    assert (f"without in {(tmp_path / 'pyproject.toml').resolve()} [tool.kernel-harness]: "
            "family 'toyopt' has no optional feature lnog; known: long") in err, err


def test_a_known_bug_in_the_configuration_is_left_out_and_named_in_every_verdict(
        capsys, tmp_path, monkeypatch):
    """[[tool.kernel-harness.known-bugs]]: the feature is left out (the impl that is wrong
    exactly there passes) and the header, the verdict and the JSON say it is a known bug,
    with the reason and the link."""
    import json

    import jsonschema

    from kernel_harness.orchestration import results

    (tmp_path / ".git").mkdir()
    (tmp_path / "pyproject.toml").write_text('[tool.kernel-harness]\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2]))
    code, out, _ = _run(capsys, *CHECK, "--impl", f"{NARROW}:short_only_undeclared")
    assert code == 1, out  # without the entry: wrong on long inputs
    out_json = tmp_path / "r.json"
    pyproject = (tmp_path / "pyproject.toml").resolve()
    (tmp_path / "pyproject.toml").write_text(
        '[tool.kernel-harness]\n[[tool.kernel-harness.known-bugs]]\nfamily = "toyopt"\n'
        'without = ["long"]\nreason = "wrong past 8 elements"\nlink = "issues/12"\n')
    code, out, _ = _run(capsys, *CHECK, "--impl", f"{NARROW}:short_only_undeclared",
                        "--json", str(out_json))
    said = (f"checked without: long (known bug: wrong past 8 elements (issues/12), from "
            f"known-bugs in {pyproject} [tool.kernel-harness])")
    assert code == 0, out
    assert f"  toyopt: {said}" in out.splitlines(), out  # the header
    assert f"toyopt: {said}" in out.splitlines(), out  # beside the verdict
    doc = json.loads(out_json.read_text())
    jsonschema.validate(doc, json.loads(results.SCHEMA_PATH.read_text()))
    adjustments = doc["environment"]["adjustments"]
    origin = said.removeprefix("checked without: long (").removesuffix(")")
    assert adjustments["known_bugs"] == {"toyopt": {"long": origin}}
    assert "without_config" not in adjustments


def test_an_unknown_feature_in_a_known_bug_names_the_file_and_the_known_ones(
        capsys, tmp_path, monkeypatch):
    (tmp_path / ".git").mkdir()
    (tmp_path / "pyproject.toml").write_text(
        '[tool.kernel-harness]\n[[tool.kernel-harness.known-bugs]]\nfamily = "toyopt"\n'
        'without = ["lnog"]\nreason = "r"\n')
    monkeypatch.chdir(tmp_path)
    code, out, err = _run(capsys, *CHECK)
    assert code == 2, out
    assert (f"known-bugs in {(tmp_path / 'pyproject.toml').resolve()} [tool.kernel-harness]: "
            "family 'toyopt' has no optional feature lnog; known: long") in err, err


@pytest.mark.parametrize("table", [
    '[tool.kernel-harness]\nwithout = {toyoptt = ["long"]}\n',
    '[tool.kernel-harness]\n[[tool.kernel-harness.known-bugs]]\nfamily = "toyoptt"\n'
    'without = ["long"]\nreason = "r"\n'])
def test_a_configured_family_that_is_not_registered_names_the_file(
        capsys, tmp_path, monkeypatch, table):
    # A typo in a family name once left nothing out, silently.
    (tmp_path / ".git").mkdir()
    (tmp_path / "pyproject.toml").write_text(table)
    monkeypatch.chdir(tmp_path)
    code, out, err = _run(capsys, *CHECK)
    assert code == 2, out
    assert f"{(tmp_path / 'pyproject.toml').resolve()} [tool.kernel-harness]" in err, err
    assert "no family named 'toyoptt' is registered; known: " in err and "toyopt" in err
