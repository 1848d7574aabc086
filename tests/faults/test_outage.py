"""Issue 39 item 2: the store is not the run. A real ``kernel-harness check`` on the toy
family with a real Redis corpus that shuts down right before the first failure is stored:
the run finishes with its FAIL (exit 1), no traceback, one line saying when the store was
lost, the failure in the spill file beside ``--json``, and ``corpus push`` delivers it to a
restarted server. A store unreachable at the start is a warning (the search runs), or exit 2
before any work with ``--require-corpus``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from kernel_harness.orchestration import results as results_module
from kernel_harness.orchestration.corpus import CorpusError, open_corpus, read_spill
from kernel_harness.records import registry
from tests.helpers.redis_server import RedisServer
from tests.orchestration.test_corpus_redis import _free_port, redis_server_binary, server_or_skip

ROOT = Path(__file__).resolve().parents[2]
STOPS_REDIS = "tests.helpers.toy_impls:wrong_at_length_8_and_stops_redis"


@pytest.fixture
def server(tmp_path):
    binary = server_or_skip(redis_server_binary(), ci=os.environ.get("CI") == "true")
    server = RedisServer(binary, _free_port(), tmp_path).start()
    yield server
    server.stop()


def _cli(*args: str, env_extra: dict[str, str] | None = None, cwd: Path = ROOT
         ) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != registry.FAMILY_MODULES_ENV}
    env.update(PYTHONPATH=str(ROOT), **(env_extra or {}))
    return subprocess.run([sys.executable, "-m", "kernel_harness.cli", *args],
                          capture_output=True, text=True, timeout=300, env=env, cwd=cwd)


def _check(location: str, *args: str, **kw) -> subprocess.CompletedProcess[str]:
    return _cli("check", "toy", "--family-module", "tests.helpers.toy_family", "--profile",
                "ci", "--property", "matches-reference", "--seed", "1", "--shrink-budget", "0",
                "--corpus", location,
                *args, **kw)


@pytest.mark.nightly  # a live redis lost mid-run (15 s): the spill file's
# writing and push are per push in the tests below and test_corpus_redis
def test_redis_lost_mid_run_keeps_the_failure_in_the_spill_file_and_push_delivers_it(
        server, tmp_path):
    results = tmp_path / "r.json"
    proc = _check(server.url, "--corpus-write", "--impl", STOPS_REDIS, "--json", str(results),
                  env_extra={"KH_TEST_STOP_REDIS_PORT": str(server.port)})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    assert "Traceback" not in out
    spill = tmp_path / "r.corpus-spill.jsonl"
    assert "corpus LOST at " in proc.stdout and str(spill) in proc.stdout, out[-3000:]
    assert "FAIL" in proc.stdout
    (entry,) = read_spill(spill)
    assert entry.family == "toy" and entry.prop == "matches-reference"
    assert f"corpus: kept {entry.id} in the spill file {spill}" in proc.stdout
    doc = json.loads(results.read_text())
    jsonschema.validate(doc, json.loads(results_module.SCHEMA_PATH.read_text()))
    assert doc["corpus"]["spill"] == str(spill)
    assert doc["corpus"]["spilled"] == [entry.id]
    assert doc["corpus"]["lost"]["at"] and "Connection refused" in doc["corpus"]["lost"]["reason"]
    assert doc["summary"]["fail"] == 1 and not doc["summary"]["ok"]

    server.stop()
    server.start()  # a fresh, empty server on the same port
    pushed = _cli("corpus", "push", str(spill), server.url)
    assert pushed.returncode == 0, pushed.stdout + pushed.stderr
    assert f"pushed {entry.id}" in pushed.stdout
    stored = open_corpus(server.url, writable=False).entries()
    assert [e.id for e in stored] == [entry.id]
    again = _cli("corpus", "push", str(spill), server.url)
    assert again.returncode == 0 and "0 of 1 entry" in again.stdout  # not stored twice


def test_an_unreachable_store_at_the_start_warns_and_the_search_runs(tmp_path):
    nobody = f"redis://127.0.0.1:{_free_port()}/0"
    proc = _check(nobody, "--impl", "tests.helpers.toy_impls:wrong_at_length_8",
                  "--corpus-write", "--json", str(tmp_path / "r.json"))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "Traceback" not in out, out[-3000:]
    assert "corpus LOST at " in proc.stdout and "not replayed" in proc.stdout
    doc = json.loads((tmp_path / "r.json").read_text())
    jsonschema.validate(doc, json.loads(results_module.SCHEMA_PATH.read_text()))
    assert doc["corpus"]["not_replayed"] == ["toy matches-reference"]
    assert len(read_spill(tmp_path / "r.corpus-spill.jsonl")) == 1


def test_require_corpus_makes_an_unreachable_store_an_error_before_any_work(tmp_path):
    nobody = f"redis://127.0.0.1:{_free_port()}/0"
    proc = _check(nobody, "--require-corpus", "--json", str(tmp_path / "r.json"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "--require-corpus" in proc.stderr and "Traceback" not in proc.stderr
    assert "PASS" not in proc.stdout and not (tmp_path / "r.json").exists()


def test_a_wrong_location_is_never_an_outage(tmp_path):
    with pytest.raises(CorpusError, match="not a corpus location|accepted|give"):
        open_corpus("ftp://nowhere/x", writable=False)


def test_push_names_a_missing_or_bad_spill_file(tmp_path):
    proc = _cli("corpus", "push", str(tmp_path / "none.jsonl"), str(tmp_path / "c"))
    assert proc.returncode == 2 and "no such file" in proc.stderr, proc.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"not": "an entry"}\n')
    proc = _cli("corpus", "push", str(bad), str(tmp_path / "c"))
    assert proc.returncode == 2 and "line 1" in proc.stderr, proc.stderr
