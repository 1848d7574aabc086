"""``kernel-harness corpus list|show|replay|drop|promote`` on a directory corpus."""

from __future__ import annotations

import json
import shlex

import pytest

from kernel_harness import cli
from kernel_harness.core.backends import resolve_backend
from kernel_harness.orchestration.corpus import entry_from_failure, open_corpus
from kernel_harness.records import registry
from tests.helpers.toy_family import ToyCase

AT_8 = "tests.helpers.toy_impls:wrong_at_length_8"


@pytest.fixture
def stored(tmp_path, monkeypatch):
    """A corpus with two toy failures (length 8: the planted bug fails it; length 4)."""
    monkeypatch.setitem(registry.BUILTIN_FAMILIES, "toy", "tests.helpers.toy_family:FAMILY")
    location = str(tmp_path / "corpus")
    corpus = open_corpus(location, writable=True)
    entries = []
    for length in (8, 4):
        entry = entry_from_failure(
            family="toy", prop="matches-reference",
            case=ToyCase(dtype="float32", seed=3, length=length), draws_json=None,
            first_line=f"[kernel-harness] FAIL toy y length {length}",
            backend=resolve_backend("interpret"), impl_spec=AT_8)
        corpus.record(entry)
        entries.append(entry)
    return location, entries


def test_list_and_show(stored, capsys):
    location, (e8, e4) = stored
    assert cli.main(["corpus", "list", "--corpus", location]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and lines[-1] == f"2 entries in {location}"
    assert any(line.startswith(f"{e8.id}  toy matches-reference  interpret impl={AT_8}")
               for line in lines)
    assert cli.main(["corpus", "show", e8.id[:6], "--corpus", location]) == 0
    out = capsys.readouterr().out
    body, command = out.rsplit("reproduce: ", 1)
    assert json.loads(body)["id"] == e8.id
    argv = shlex.split(command)
    assert argv[:3] == ["kernel-harness", "repro", "toy"] and "--impl" in argv
    # The printed command replays the stored case: the planted bug fails it.
    assert cli.main(argv[1:]) == 1
    assert "[kernel-harness] FAIL toy" in capsys.readouterr().out


def test_replay_fails_on_the_bug_and_passes_on_the_pristine_kernel(stored, capsys):
    location, (e8, e4) = stored
    assert cli.main(["corpus", "replay", "toy", "--corpus", location, "--impl", AT_8]) == 1
    out = capsys.readouterr().out
    assert f"corpus FAIL toy matches-reference {e8.id}" in out
    assert f"corpus PASS toy matches-reference {e4.id}" in out
    assert "reproduce: kernel-harness repro toy" in out
    assert "FAIL: corpus replay on interpret: 1 pass, 1 fail (2 entries" in out
    assert cli.main(["corpus", "replay", "--corpus", location]) == 0
    assert "PASS: corpus replay on interpret: 2 pass (2 entries" in capsys.readouterr().out


def test_drop_and_errors(stored, capsys, tmp_path):
    location, (e8, e4) = stored
    assert cli.main(["corpus", "drop", e4.id, "--corpus", location]) == 0
    assert f"dropped {e4.id}" in capsys.readouterr().out
    assert cli.main(["corpus", "list", "--corpus", location]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"1 entry in {location}"
    assert cli.main(["corpus", "drop", e4.id, "--corpus", location]) == 2
    assert cli.main(["corpus", "drop", e8.id, "--corpus", f"ro:{location}"]) == 2
    assert cli.main(["corpus", "list", "--corpus", "ftp://x"]) == 2
    assert cli.main(["corpus", "list", "--corpus", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 4 and all(line.startswith("kernel-harness: error: ") for line in err)
    assert "read-only" in err[1] and "not a corpus location" in err[2]
    assert "no such directory" in err[3]


def test_promote_makes_a_golden_with_its_why(stored, capsys, tmp_path):
    location, (e8, _) = stored
    golden = tmp_path / "golden"
    argv = ["corpus", "promote", e8.id, "--corpus", location, "--golden-dir", str(golden),
            "--why", "last element of length 8 was off by 1% (nightly)", "--tag", "ci"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    name = f"corpus-{e8.id[:8]}"
    assert out.startswith(f"RECORDED golden toy/{name}")
    manifest = json.loads((golden / "toy" / "cases.json").read_text())
    (case,) = manifest["cases"]
    assert case == {"name": name, "tags": ["ci"], "case": e8.case,
                    "why": "last element of length 8 was off by 1% (nightly)"}
    assert (golden / "toy" / f"{name}.npz").is_file()
    # The golden checks (the pristine kernel passes it); the corpus keeps the entry.
    assert cli.main(["golden", "check", "toy", "--golden-dir", str(golden)]) == 0
    capsys.readouterr()
    assert cli.main(["corpus", "promote", e8.id, "--corpus", location, "--golden-dir",
                     str(golden), "--why", "again"]) == 2  # the name is taken
    assert "already has a golden case" in capsys.readouterr().err
    assert cli.main(["corpus", "promote", e8.id, "--corpus", location, "--golden-dir",
                     str(golden), "--why", "  ", "--name", "other"]) == 2
    assert "needs --why" in capsys.readouterr().err
