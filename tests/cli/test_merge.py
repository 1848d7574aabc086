"""``kernel-harness merge``: the --json results of several check runs as one summary, one
exit code, one schema-valid document and one JUnit file; inputs that cannot be merged
honestly are refused in one line (exit 2)."""

from __future__ import annotations

import copy
import json

import jsonschema
import junitparser
import pytest

from kernel_harness import cli
from kernel_harness.orchestration import results
from kernel_harness.records import registry


@pytest.fixture(scope="module")
def schema():
    return json.loads(results.SCHEMA_PATH.read_text())


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two real check runs of the toy family: one passing, one with a planted bug."""
    d = tmp_path_factory.mktemp("runs")
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(registry.BUILTIN_FAMILIES, "toy", "tests.helpers.toy_family:FAMILY")
        for name, extra in (("pass", []), ("fail", ["--impl",
                                                    "tests.helpers.toy_family:wrong_softplus"])):
            cli.main(["check", "--no-isolate", "toy", "--profile", "ci", "--max-examples", "3",
                      "--seed", "1", "--json", str(d / f"{name}.json"), *extra])
    return {n: json.loads((d / f"{n}.json").read_text()) for n in ("pass", "fail")}


def _as_family(doc, family, **env):
    """The document as another shard would have written it: other family name, other env."""
    doc = copy.deepcopy(doc)
    for r in doc["properties"]:
        r["family"] = family
    doc["environment"].update(env)
    return doc


def _write(tmp_path, **docs):
    paths = {}
    for name, doc in docs.items():
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(json.dumps(doc))
    return paths


def _merge(capsys, *argv):
    code = cli.main(["merge", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def test_two_shards_merge_into_one_valid_document_and_junit(tmp_path, runs, schema, capsys):
    p = _write(tmp_path, a=runs["pass"], b=_as_family(runs["pass"], "toy-b", seed=2))
    j, x = tmp_path / "m" / "merged.json", tmp_path / "m" / "merged.xml"
    code, out, _ = _merge(capsys, p["a"], p["b"], "--json", j, "--junit", x)
    assert code == 0, out
    doc = json.loads(j.read_text())
    jsonschema.validate(doc, schema)
    units = [(r["family"], r["property"]) for r in doc["properties"]]
    assert len(units) == len(set(units)) == 2 * len(runs["pass"]["properties"])
    # two shards, each with matches-reference and deterministic passed
    assert doc["summary"]["ok"] is True and doc["summary"]["pass"] == 4
    # the seeds differ: null in the merged environment, each kept in merged_from
    assert doc["environment"]["seed"] is None
    assert [m["environment"]["seed"] for m in doc["environment"]["merged_from"]] == [1, 2]
    assert [m["path"] for m in doc["environment"]["merged_from"]] == [str(p["a"]), str(p["b"])]
    suites = {s.name: s for s in junitparser.JUnitXml.fromfile(str(x))}
    assert set(suites) == {"toy", "toy-b"} and all(s.failures == 0 for s in suites.values())
    assert "PASS: 2 results merged (backend interpret" in out


def test_one_failing_shard_fails_the_merge(tmp_path, runs, schema, capsys):
    p = _write(tmp_path, a=runs["pass"], b=_as_family(runs["fail"], "toy-b"))
    j = tmp_path / "merged.json"
    code, out, _ = _merge(capsys, p["a"], p["b"], "--json", j)
    assert code == 1
    doc = json.loads(j.read_text())
    jsonschema.validate(doc, schema)
    assert doc["summary"]["ok"] is False and doc["summary"]["fail"] == 1
    (row,) = [line for line in out.splitlines() if line.startswith("toy-b") and " FAIL " in line]
    assert "b.json" in row and "max rel err" in row
    assert out.rstrip().splitlines()[-2].startswith("FAIL: 2 results merged")


def test_an_interrupted_shard_merges_and_fails_the_merge(tmp_path, runs, schema, capsys):
    """A preempted host's document (a unit INTERRUPTED, as `check` writes it on SIGTERM) is
    merged, counted and not a pass; seen first on a GPU host, where merge refused it."""
    stopped = _as_family(runs["pass"], "toy-b")
    unit = next(r for r in stopped["properties"] if r["verdict"] == "PASS")
    unit.update(verdict="INTERRUPTED", reason="interrupted by SIGTERM after 2 examples",
                error={"type": "RunInterrupted", "message": "interrupted by SIGTERM"})
    p = _write(tmp_path, a=runs["pass"], b=stopped)
    j = tmp_path / "merged.json"
    code, out, _ = _merge(capsys, p["a"], p["b"], "--json", j)
    doc = json.loads(j.read_text())
    jsonschema.validate(doc, schema)
    assert code == 1 and doc["summary"]["ok"] is False and doc["summary"]["interrupted"] == 1
    assert "1 interrupted" in out.rstrip().splitlines()[-2]


def test_nothing_ran_is_not_a_pass(tmp_path, runs, capsys):
    skips = copy.deepcopy(runs["pass"])
    skips["properties"] = [r for r in skips["properties"] if r["verdict"] == "SKIP"]
    p = _write(tmp_path, a=skips)
    code, out, _ = _merge(capsys, p["a"])
    assert code == 1 and "nothing ran, which is not a pass" in out


def test_a_unit_in_two_inputs_must_be_identical(tmp_path, runs, capsys):
    p = _write(tmp_path, a=runs["pass"], same=runs["pass"], other=runs["fail"])
    code, out, _ = _merge(capsys, p["a"], p["same"])
    assert code == 0  # identical records: kept once
    code, _, err = _merge(capsys, p["a"], p["other"])
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "toy / matches-reference is in" in err and "(PASS) and in" in err
    code, _, err = _merge(capsys, p["a"], p["a"])
    assert code == 2 and "given more than once" in err


@pytest.mark.parametrize("field,value", [
    ("jax", "0.0.1"), ("backend", "tpu"), ("profile", "nightly"),
    ("jax_numerics", {"jax_default_matmul_precision": "highest"})])
def test_inputs_one_value_cannot_describe_are_refused(tmp_path, runs, capsys, field, value):
    p = _write(tmp_path, a=runs["pass"], b=_as_family(runs["pass"], "toy-b", **{field: value}))
    code, out, err = _merge(capsys, p["a"], p["b"])
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert f"the merged document has one {field} and the inputs differ" in err


def test_bad_inputs_and_outputs_are_one_line_errors(tmp_path, runs, capsys):
    p = _write(tmp_path, a=runs["pass"], other={"schema": "something-else"})
    (tmp_path / "broken.json").write_text("{")
    for argv, text in (([tmp_path / "missing.json"], "cannot read"),
                       ([tmp_path / "broken.json"], "not JSON"),
                       ([p["other"]], "not a `kernel-harness check --json` document"),
                       ([p["a"], "--json", "/proc/no/such/r.json"],
                        "--json /proc/no/such/r.json: cannot write: "),
                       ([p["a"], "--junit", tmp_path], "is a folder")):
        code, out, err = _merge(capsys, *argv)
        assert code == 2 and text in err and len(err.strip().splitlines()) == 1, (argv, err)


def test_a_run_at_non_default_jax_numerics_says_so(tmp_path, capsys):
    """JAX_DEFAULT_MATMUL_PRECISION=highest (or the same in jax.config) changes every XLA
    dot on a GPU (TF32 -> IEEE float32): the header and the JSON say it, and merge refuses
    to mix such a run with a default one."""
    import jax

    with pytest.MonkeyPatch.context() as mp, jax.default_matmul_precision("highest"):
        mp.setitem(registry.BUILTIN_FAMILIES, "toy", "tests.helpers.toy_family:FAMILY")
        cli.main(["check", "--no-isolate", "toy", "--property", "matches-reference",
                  "--profile", "dev", "--max-examples", "1", "--json", str(tmp_path / "h.json")])
    out = capsys.readouterr().out
    assert ("jax numerics not jax's defaults: jax_default_matmul_precision=highest"
            in out.splitlines()[2])
    env = json.loads((tmp_path / "h.json").read_text())["environment"]
    assert env["jax_numerics"] == {"jax_default_matmul_precision": "highest"}
