"""`check` prints the first failing example before shrinking, says how shrinking ended, and
with --fail-fast lists a failed family's remaining properties as NOT RUN."""

import pytest

from kernel_harness import cli
from kernel_harness.checks import properties
from kernel_harness.checks.matches_reference import matches_reference
from kernel_harness.records import registry

TOY = "tests.helpers.toy_family:FAMILY"
BUG = "tests.helpers.toy_family:wrong_softplus"


@pytest.fixture
def toy_registry(monkeypatch):
    monkeypatch.setitem(registry.BUILTIN_FAMILIES, "toy", TOY)
    # A second property the toy family can run, so --fail-fast has something to skip.
    monkeypatch.setitem(properties.PROPERTIES, "matches-reference-again", matches_reference)


def _check(capsys, *extra):
    code = cli.main(["check", "--no-isolate",
                     "toy", "--profile", "ci", "--max-examples", "5", "--impl", BUG,
                     *extra])
    return code, capsys.readouterr().out


def test_first_failure_is_printed_before_the_full_report(capsys, toy_registry):
    code, out = _check(capsys, "--property", "matches-reference")
    assert code == 1
    first = out.index("--- first failing example")
    full = out.index("=== toy / matches-reference FAILED")
    assert first < full
    head = out[first:full].splitlines()
    assert head[1].startswith("[kernel-harness] FAIL toy y float32")
    assert any("reproduce: kernel-harness repro toy" in line for line in head)
    assert "shrinking finished within the budget" in out or "shrinking stopped" in out


def test_fail_fast_lists_the_remaining_properties_not_run(capsys, toy_registry):
    code, out = _check(capsys, "--fail-fast")
    assert code == 1
    rows = [line for line in out.splitlines() if line.startswith("toy ")]
    again = next(line for line in rows if "matches-reference-again" in line)
    assert "NOT RUN (--fail-fast: matches-reference failed)" in again
    assert out.count("=== toy /") == 1


def test_without_fail_fast_every_property_runs(capsys, toy_registry):
    code, out = _check(capsys)
    assert code == 1 and "NOT RUN" not in out and out.count("=== toy /") == 2
