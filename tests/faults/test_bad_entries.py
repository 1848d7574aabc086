"""Issue 39 item 3: a bad corpus entry is quarantined, never fatal. Entries that fail
their hash, are not JSON, are of an unknown format version, hold a case past the case
limits or one the case type refuses are each skipped with one line and counted in the
JSON; the unit runs (and the pristine kernel passes). ``corpus check`` lists them and
``corpus drop --bad`` removes them, leaving the good entry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
from hypothesis.database import DirectoryBasedExampleDatabase

from kernel_harness import cli
from kernel_harness.core.backends import resolve_backend
from kernel_harness.orchestration import results
from kernel_harness.orchestration.corpus import entry_from_failure, entry_id
from kernel_harness.orchestration.corpus.quarantine import MAX_CASE_INT
from kernel_harness.records import registry
from tests.helpers.toy_family import ToyCase

ROOT = Path(__file__).resolve().parents[2]
KEY = b"kernel-harness-corpus/v1/unit/toy/matches-reference"
INDEX = b"kernel-harness-corpus/v1/index"


def _good() -> dict:
    entry = entry_from_failure(family="toy", prop="matches-reference",
                               case=ToyCase(dtype="float32", seed=3, length=8),
                               draws_json=None, first_line="FAIL toy y",
                               backend=resolve_backend("interpret"),
                               impl_spec="tests.helpers.toy_impls:wrong_at_length_8")
    return json.loads(entry.to_json())


def _rehashed(data: dict) -> bytes:
    data["id"] = entry_id(data["family"], data["property"], data["case"], data["draws"])
    return json.dumps(data).encode()


def plant(directory: Path) -> dict[str, bytes]:
    """A corpus holding one good entry and five bad ones, by why they are bad."""
    db = DirectoryBasedExampleDatabase(directory)
    good = _good()
    tampered = _good()
    tampered["case"]["length"] = 4  # the id no longer matches
    newer = {**_good(), "schema": "kernel-harness-corpus-entry/2"}
    huge = _good()
    huge["case"]["length"] = MAX_CASE_INT * 64
    refused = _good()
    refused["case"]["dtype"] = "float64"
    bad = {"hash": json.dumps(tampered).encode(), "json": b"{not json",
           "version": json.dumps(newer).encode(), "limit": _rehashed(huge),
           "case": _rehashed(refused)}
    db.save(INDEX, json.dumps(["toy", "matches-reference"]).encode())
    db.save(KEY, json.dumps(good).encode())
    for raw in bad.values():
        db.save(KEY, raw)
    return bad


def test_a_run_skips_each_bad_entry_with_one_line_and_the_unit_passes(tmp_path):
    corpus = tmp_path / "corpus"
    plant(corpus)
    out = tmp_path / "r.json"
    env = {k: v for k, v in os.environ.items() if k != registry.FAMILY_MODULES_ENV}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(
        [sys.executable, "-m", "kernel_harness.cli", "check", "toy", "--family-module",
         "tests.helpers.toy_family", "--profile", "ci", "--property", "matches-reference",
         "--max-examples", "2", "--corpus", str(corpus), "--json", str(out)],
        capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text
    assert "Traceback" not in text and "CRASH" not in text
    lines = [line for line in proc.stdout.splitlines() if "corpus QUARANTINED" in line]
    assert len(lines) == 5, lines
    why = "\n".join(lines)
    for reason in ("does not match its contents", "not valid JSON", "format version '2'",
                   "past the case limit", "does not load as ToyCase"):
        assert why.count(reason) == 1, (reason, why)
    assert all("kernel-harness corpus drop " in line for line in lines)
    # The good entry replayed (and passes on the pristine kernel), the search ran.
    assert "corpus PASS toy matches-reference" in proc.stdout
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, json.loads(results.SCHEMA_PATH.read_text()))
    (rec,) = doc["properties"]
    assert rec["verdict"] == "PASS" and rec["examples"] >= 2
    assert len(rec["corpus_quarantined"]) == 5
    assert len(doc["corpus"]["quarantined"]) == 5 and doc["corpus"]["mode"] == "read"


def test_corpus_check_lists_the_bad_entries_and_drop_bad_removes_them(tmp_path, monkeypatch,
                                                                       capsys):
    monkeypatch.setitem(registry.BUILTIN_FAMILIES, "toy", "tests.helpers.toy_family:FAMILY")
    corpus = tmp_path / "corpus"
    plant(corpus)
    assert cli.main(["corpus", "check", str(corpus)]) == 1
    out = capsys.readouterr().out
    assert out.count("corpus QUARANTINED toy matches-reference") == 5, out
    assert "5 bad entries, 1 good" in out
    assert cli.main(["corpus", "drop", "--bad", "--corpus", str(corpus)]) == 0
    assert "5 bad entries dropped" in capsys.readouterr().out
    assert cli.main(["corpus", "check", "--corpus", str(corpus)]) == 0
    assert "0 bad entries, 1 good" in capsys.readouterr().out
    assert cli.main(["corpus", "list", "--corpus", str(corpus)]) == 0
    assert "1 entry in" in capsys.readouterr().out


def test_drop_takes_a_bad_entry_by_its_id(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(registry.BUILTIN_FAMILIES, "toy", "tests.helpers.toy_family:FAMILY")
    corpus = tmp_path / "corpus"
    bad = plant(corpus)
    import hashlib

    one = hashlib.sha256(bad["json"]).hexdigest()[:16]
    assert cli.main(["corpus", "drop", one[:8], "--corpus", str(corpus)]) == 0
    assert f"dropped bad entry {one}" in capsys.readouterr().out
    cli.main(["corpus", "check", str(corpus)])
    assert "4 bad entries, 1 good" in capsys.readouterr().out
