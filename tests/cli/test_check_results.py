"""``check --json`` validates against its versioned schema; ``check --junit`` is JUnit XML
(parsed with junitparser, an independent reader) with one testcase per family x property."""

from __future__ import annotations

import copy
import json

import jsonschema
import junitparser
import pytest

from kernel_harness import cli
from kernel_harness.orchestration import results
from kernel_harness.records import registry

TOY = "tests.helpers.toy_family:FAMILY"


@pytest.fixture
def toy_registry(monkeypatch):
    monkeypatch.setitem(registry.BUILTIN_FAMILIES, "toy", TOY)


@pytest.fixture(scope="module")
def schema():
    doc = json.loads(results.SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(doc)
    return doc


def _check(tmp_path, *extra):
    j, x = tmp_path / "out" / "r.json", tmp_path / "out" / "r.xml"
    code = cli.main(["check", "--no-isolate", "toy", "--profile", "ci", "--max-examples", "5",
                     "--json", str(j), "--junit", str(x), *extra])
    return code, json.loads(j.read_text()), junitparser.JUnitXml.fromfile(str(x))


def test_failing_run_json_validates_and_names_the_case(tmp_path, toy_registry, schema, capsys):
    code, doc, xml = _check(tmp_path, "--impl", "tests.helpers.toy_family:wrong_softplus")
    assert code == 1
    jsonschema.validate(doc, schema)
    env = doc["environment"]
    assert env["backend"] == "interpret" and env["profile"] == "ci" and env["jax"]
    assert env["device_kind"] == "cpu" and env["impl"].endswith("wrong_softplus")
    (ref,) = [p for p in doc["properties"] if p["property"] == "matches-reference"]
    assert ref["verdict"] == "FAIL" and ref["examples"] >= 1 and ref["events"]
    failure = ref["failure"]
    assert failure["repro"].startswith("kernel-harness repro toy --backend interpret --case ")
    assert json.loads(failure["case_json"]) == failure["case"]
    y = next(o for o in failure["outputs"] if o["output"] == "y")
    assert not y["passed"] and y["max_rel_err"] > y["tolerance"]
    assert y["worst_location"].startswith("index=")
    assert doc["summary"]["ok"] is False and doc["summary"]["fail"] == 1
    # JUnit: one testcase per family x property, the failure carries the repro command.
    (suite,) = list(xml)
    cases = {c.name: c for c in suite}
    assert len(cases) == len(doc["properties"])
    (fail,) = cases["matches-reference"].result
    assert isinstance(fail, junitparser.Failure) and "reproduce: kernel-harness repro" in fail.text
    # The toy family has no hooks: of the other properties only deterministic runs (and
    # passes: the planted bug is deterministic); the rest are skips with their reason.
    assert not cases["deterministic"].result
    assert all(isinstance(c.result[0], junitparser.Skipped)
               for n, c in cases.items() if n not in ("matches-reference", "deterministic"))


def test_passing_run_is_ok_in_both(tmp_path, toy_registry, schema, capsys):
    code, doc, xml = _check(tmp_path)
    assert code == 0
    jsonschema.validate(doc, schema)
    assert doc["summary"]["ok"] is True and doc["summary"]["pass"] == 2  # + deterministic
    (suite,) = list(xml)
    assert suite.failures == 0 and suite.errors == 0
    assert not cases_with_results(suite, "matches-reference")


def cases_with_results(suite, name):
    return [r for c in suite if c.name == name for r in c.result]


def test_schema_rejects_what_it_should(tmp_path, toy_registry, schema, capsys):
    _, doc, _ = _check(tmp_path, "--impl", "tests.helpers.toy_family:wrong_softplus")
    for breakage in (
        lambda d: d["properties"][0].update(verdict="MAYBE"),
        lambda d: d["properties"][0]["failure"].pop("repro"),
        lambda d: d["properties"][0]["failure"]["outputs"][0].update(max_rel_err=None),
        lambda d: d.update(schema_version=2),
        lambda d: d["environment"].pop("jax"),
    ):
        broken = copy.deepcopy(doc)
        breakage(broken)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, schema)
