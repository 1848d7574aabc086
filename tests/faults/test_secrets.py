"""Issue 39 item 4: a corpus password appears in no output. A real ``redis-server`` with
``--requirepass``; the password given in the URL, in ``$KH_CORPUS_PASSWORD`` and in
``$REDISCLI_AUTH``; stdout, stderr, the JSON and the JUnit file (its properties too) are
searched for it. ``rediss://`` takes TLS options; a GitHub token is never part of a
location."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_harness import cli
from kernel_harness.orchestration.corpus import CorpusError, open_corpus
from kernel_harness.orchestration.corpus.location import redact, redis_options
from kernel_harness.records import registry
from tests.helpers.redis_server import RedisServer
from tests.orchestration.test_corpus_redis import _free_port, redis_server_binary, server_or_skip

ROOT = Path(__file__).resolve().parents[2]
SECRET = "Sw0rdfish-kh39"
AT_8 = "tests.helpers.toy_impls:wrong_at_length_8"


@pytest.fixture
def server(tmp_path):
    binary = server_or_skip(redis_server_binary(), ci=os.environ.get("CI") == "true")
    server = RedisServer(binary, _free_port(), tmp_path, password=SECRET).start()
    yield server
    server.stop()


def _check(tmp_path: Path, location: str, *args: str, env_extra: dict[str, str] | None = None,
           ) -> tuple[subprocess.CompletedProcess[str], str]:
    env = {k: v for k, v in os.environ.items()
           if k not in (registry.FAMILY_MODULES_ENV, "KH_CORPUS_PASSWORD", "REDISCLI_AUTH")}
    env.update(PYTHONPATH=str(ROOT), **(env_extra or {}))
    out, xml = tmp_path / "r.json", tmp_path / "r.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "kernel_harness.cli", "check", "toy", "--family-module",
         "tests.helpers.toy_family", "--profile", "ci", "--property", "matches-reference",
         "--corpus", location, "--json", str(out), "--junit", str(xml), *args],
        capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    everything = "\n".join([proc.stdout, proc.stderr, out.read_text() if out.exists() else "",
                            xml.read_text() if xml.exists() else ""])
    return proc, everything


def test_a_password_in_the_url_is_in_no_output_file_or_junit_property(server, tmp_path):
    url = f"redis://:{SECRET}@127.0.0.1:{server.port}/0"
    proc, everything = _check(tmp_path, url, "--impl", AT_8, "--corpus-write")
    assert proc.returncode == 1 and "corpus: stored " in proc.stdout, everything[-3000:]
    assert SECRET not in everything
    masked = f"redis://:***@127.0.0.1:{server.port}/0"
    assert f"corpus {masked} (read-write)" in proc.stdout
    assert json.loads((tmp_path / "r.json").read_text())["corpus"]["location"] == masked
    assert f'name="corpus" value="{masked}"' in (tmp_path / "r.xml").read_text()


@pytest.mark.parametrize("variable", [  # the second variable takes the same path: nightly
    "KH_CORPUS_PASSWORD", pytest.param("REDISCLI_AUTH", marks=pytest.mark.nightly)])
def test_the_password_from_the_environment_reaches_redis_and_no_output(server, tmp_path,
                                                                      variable):
    proc, everything = _check(tmp_path, server.url, "--impl", AT_8, "--corpus-write",
                              env_extra={variable: SECRET})
    assert proc.returncode == 1 and "corpus: stored " in proc.stdout, everything[-3000:]
    assert SECRET not in everything and "Traceback" not in everything
    import redis

    client = redis.Redis(host="127.0.0.1", port=server.port, password=SECRET)
    assert client.smembers(b"kernel-harness-corpus/v1/index")  # it really was stored


def test_a_refused_or_missing_password_is_one_line_without_it(server, capsys, monkeypatch):
    monkeypatch.delenv("KH_CORPUS_PASSWORD", raising=False)
    monkeypatch.delenv("REDISCLI_AUTH", raising=False)
    wrong = "Not-the-One-kh39"
    assert cli.main(["corpus", "list", "--corpus",
                     f"redis://:{wrong}@127.0.0.1:{server.port}/0"]) == 2
    err = capsys.readouterr().err
    assert wrong not in err and "redis://:***@127.0.0.1" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert cli.main(["corpus", "list", "--corpus", server.url]) == 2
    assert "KH_CORPUS_PASSWORD" in capsys.readouterr().err
    monkeypatch.setenv("KH_CORPUS_PASSWORD", SECRET)
    assert cli.main(["corpus", "list", "--corpus", server.url]) == 0
    out = capsys.readouterr()
    assert "0 entries in" in out.out and SECRET not in out.out + out.err


def test_redact_masks_every_form_and_keeps_the_rest():
    assert redact(f"redis://:{SECRET}@h:6380/1") == "redis://:***@h:6380/1"
    assert redact(f"ro:rediss://kh:{SECRET}@h/0,dir") == "ro:rediss://kh:***@h/0,dir"
    assert redact("redis://h:6379/0") == "redis://h:6379/0"
    assert redact("/some/dir") == "/some/dir"


def test_rediss_takes_tls_options_and_refuses_unknown_ones(tmp_path, monkeypatch):
    monkeypatch.setenv("KH_CORPUS_PASSWORD", SECRET)
    options = redis_options("rediss://kh@corpus.internal:6380/2?ssl_ca_certs=/ca.pem"
                            "&ssl_cert_reqs=required&ssl_check_hostname=false")
    assert options["ssl"] is True and options["ssl_ca_certs"] == "/ca.pem"
    assert options["ssl_cert_reqs"] == "required" and options["ssl_check_hostname"] is False
    assert (options["host"], options["port"], options["db"]) == ("corpus.internal", 6380, 2)
    assert options["password"] == SECRET and options["username"] == "kh"
    with pytest.raises(CorpusError, match="unknown option"):
        redis_options("rediss://h/0?password=x")
    with pytest.raises(CorpusError, match="for rediss:// only"):
        redis_options("redis://h/0?ssl_ca_certs=/ca.pem")
    with pytest.raises(CorpusError, match="GITHUB_TOKEN only") as e:
        open_corpus(f"github:{SECRET}@org/repo", writable=False)
    assert SECRET not in str(e.value)


def test_rediss_to_a_plain_server_is_a_clear_error_without_the_password(server):
    with pytest.raises(CorpusError, match="cannot reach Redis") as e:
        open_corpus(f"rediss://:{SECRET}@127.0.0.1:{server.port}/0", writable=False)
    assert SECRET not in str(e.value) and "rediss://:***@127.0.0.1" in str(e.value)
