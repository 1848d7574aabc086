"""The failure corpus (issue 21 item 1): entries, stores, the read/write rule, replay.

The acceptance in spirit: a planted bug that only some cases reach is found by a run with
a corpus; a later one-example run with another seed passes without the corpus, and fails
with it because the stored case is replayed first; the pristine kernel passes the replay.
"""

from __future__ import annotations

import datetime
import json
import zipfile

import pytest

from kernel_harness.checks.metamorphic import MetamorphicFailure
from kernel_harness.core.backends import resolve_backend
from kernel_harness.core.errors import UsageError
from kernel_harness.orchestration.corpus import (
    ACCEPTED,
    CorpusEntry,
    CorpusError,
    corpus_mode,
    entry_from_failure,
    entry_id,
    failure_of,
    open_corpus,
    replay_entries,
)
from kernel_harness.records import registry
from kernel_harness.records.registry import get_family
from tests.helpers.corpus_session import run_unit
from tests.helpers.toy_family import ToyCase

TOY = "tests.helpers.toy_family:FAMILY"
AT_8 = "tests.helpers.toy_impls:wrong_at_length_8"
PK = "tests.helpers.planted_kernels"


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(registry.BUILTIN_FAMILIES, "toy", TOY)
    return get_family("toy")


def _entry(seed: int = 0, length: int = 8, line: str = "FAIL toy y") -> CorpusEntry:
    return entry_from_failure(
        family="toy", prop="matches-reference",
        case=ToyCase(dtype="float32", seed=seed, length=length), draws_json=None,
        first_line=line, backend=resolve_backend("interpret"), impl_spec=AT_8)


def test_acceptance_a_stored_failure_is_replayed_first_by_a_later_run(tmp_path, toy):
    corpus = open_corpus(str(tmp_path / "corpus"), writable=True)
    found = run_unit(corpus, "toy", "matches-reference", impl_spec=AT_8, seed=1,
                     max_examples=20)
    assert found.failed and len(found.recorded) == 1
    (entry,) = corpus.entries("toy", "matches-reference")
    assert entry.case["length"] == 8 and entry.impl == AT_8
    assert entry.first_line.startswith("[kernel-harness] FAIL toy")

    # The later run: one example, another seed. Without the corpus it passes (its one
    # example does not reach the bug) ...
    alone = run_unit(None, "toy", "matches-reference", impl_spec=AT_8, seed=777,
                     max_examples=1)
    assert not alone.failed and alone.searched
    # ... with the corpus (read-only, as ci reads) the stored case runs first and fails.
    ci = open_corpus(str(tmp_path / "corpus"), writable=False)
    later = run_unit(ci, "toy", "matches-reference", impl_spec=AT_8, seed=777,
                     max_examples=1)
    assert later.failed and not later.searched
    (replayed,) = later.replayed
    assert replayed.status == "FAIL" and replayed.entry.id == entry.id
    assert "reproduce: kernel-harness repro toy" in replayed.report
    assert replayed.line().startswith(f"[kernel-harness] corpus FAIL toy matches-reference "
                                      f"{entry.id}")
    # The pristine kernel passes the replayed corpus, and the entry stays.
    fixed = run_unit(ci, "toy", "matches-reference", impl_spec=None, seed=777, max_examples=1)
    assert [r.status for r in fixed.replayed] == ["PASS"] and not fixed.failed
    assert [e.id for e in ci.entries()] == [entry.id]


def test_the_same_failure_stored_twice_is_one_entry(tmp_path, toy):
    corpus = open_corpus(str(tmp_path), writable=True)
    first, again = _entry(line="first"), _entry(line="found again, other words")
    assert first.id == again.id == entry_id("toy", "matches-reference", first.case, None)
    assert corpus.record(first) is True
    assert corpus.record(again) is False
    assert corpus.record(_entry(seed=1)) is True
    assert [e.first_line for e in corpus.entries()].count("first") == 1
    assert len(corpus.entries()) == 2
    assert corpus.units() == [("toy", "matches-reference")]


def test_entry_round_trip_and_tamper_check():
    e = _entry()
    assert CorpusEntry.from_json(e.to_json()) == e
    data = json.loads(e.to_json())
    assert data["schema"] == "kernel-harness-corpus-entry/1" and data["property"] == e.prop
    assert {"case", "draws", "first_line", "backend", "device_kind", "jax_version", "impl",
            "date", "id", "family"} <= set(data)
    data["case"]["length"] = 4
    with pytest.raises(CorpusError, match="does not match its contents"):
        CorpusEntry.from_json(json.dumps(data))
    with pytest.raises(CorpusError, match="not a kernel-harness-corpus-entry/1"):
        CorpusEntry.from_json(b'{"schema": "other"}')
    with pytest.raises(CorpusError, match="not valid JSON"):
        CorpusEntry.from_json(b"not json")
    with pytest.raises(CorpusError, match="format version '2'"):
        CorpusEntry.from_json(b'{"schema": "kernel-harness-corpus-entry/2"}')


def test_entry_from_failure_refuses_what_cannot_replay():
    with pytest.raises(ValueError, match="only matches-reference and metamorphic"):
        entry_from_failure(family="toy", prop="lowers-for-tpu", case=ToyCase(
            dtype="float32", seed=0, length=4), draws_json=None, first_line="x",
            backend=resolve_backend("interpret"), impl_spec=None)
    with pytest.raises(ValueError, match="draws_json"):
        entry_from_failure(family="toy", prop="matches-reference", case=ToyCase(
            dtype="float32", seed=0, length=4), draws_json="[]", first_line="x",
            backend=resolve_backend("interpret"), impl_spec=None)


def test_find_drop_and_read_only(tmp_path, toy):
    corpus = open_corpus(str(tmp_path), writable=True)
    a, b = _entry(seed=1), _entry(seed=2)
    corpus.record(a)
    corpus.record(b)
    assert corpus.find(a.id[:6]) == a
    with pytest.raises(CorpusError, match="at least 4"):
        corpus.find("ab")
    with pytest.raises(CorpusError, match="no entry with id 'ffffffff'"):
        corpus.find("ffffffff")
    ro = open_corpus(f"ro:{tmp_path}", writable=False)
    with pytest.raises(CorpusError, match="read-only; dropping an entry needs a writable"):
        ro.drop(a.id)
    with pytest.raises(CorpusError, match="read-only; recording"):
        open_corpus(str(tmp_path), writable=False).record(_entry(seed=3))
    assert corpus.drop(a.id) == a
    assert [e.id for e in corpus.entries()] == [b.id]
    corpus.drop(b.id)
    assert corpus.entries() == [] and corpus.units() == []


@pytest.mark.parametrize(("location", "message"), [
    ("", "empty"),
    ("a,,b", "empty"),
    ("s3://bucket/x", "not a corpus location"),
    ("ro:ro:x", "not a corpus location"),
    ("redis://", "give redis://"),
    ("redis://h:notaport", "numbers for PORT and DB"),
    ("redis://h:1/x", "numbers for PORT and DB"),
    ("redis://h:1/0?ssl_ca_certs=x", "for rediss:// only"),
    ("rediss://h:1/0?bogus=1", "unknown option"),
    ("github:owner", "give github:OWNER/REPO"),
    ("github:a/b/c/d", "give github:OWNER/REPO"),
])
def test_a_bad_location_is_one_line_saying_what_is_accepted(location, message):
    with pytest.raises(UsageError, match=message) as info:
        open_corpus(location, writable=True)
    assert "\n" not in str(info.value)
    if message in ("empty", "not a corpus location"):
        assert ACCEPTED in str(info.value)


def test_locations_that_exist_or_not(tmp_path):
    with pytest.raises(CorpusError, match="no such directory"):
        open_corpus(str(tmp_path / "missing"), writable=False)
    (tmp_path / "file").write_text("x")
    with pytest.raises(CorpusError, match="not a directory"):
        open_corpus(str(tmp_path / "file"), writable=True)
    with pytest.raises(CorpusError, match="read-only, but this run records"):
        open_corpus(f"ro:{tmp_path}", writable=True)
    with pytest.raises(CorpusError, match="cannot reach Redis"):
        open_corpus("redis://127.0.0.1:1", writable=False)  # nothing listens on port 1
    made = tmp_path / "new" / "corpus"
    assert open_corpus(str(made), writable=True).entries() == [] and made.is_dir()


def test_several_locations_read_all_write_the_writable(tmp_path, toy):
    shared, local = tmp_path / "shared", tmp_path / "local"
    open_corpus(str(shared), writable=True).record(_entry(seed=1))
    both = open_corpus(f"{local},ro:{shared}", writable=True)
    assert [e.case["seed"] for e in both.entries()] == [1]
    both.record(_entry(seed=2))
    assert [e.case["seed"] for e in open_corpus(str(local), writable=False).entries()] == [2]
    assert [e.case["seed"] for e in open_corpus(str(shared), writable=False).entries()] == [1]
    assert sorted(e.case["seed"] for e in both.entries()) == [1, 2]


def test_a_github_artifact_corpus_reads_a_nightly_directory(tmp_path, monkeypatch, toy):
    # What a nightly uploads (its corpus directory, zipped as GitHub serves artifacts),
    # put where the artifact database caches downloads: read with no network.
    nightly = tmp_path / "nightly"
    open_corpus(str(nightly), writable=True).record(_entry(seed=5))
    cache = tmp_path / "cache"
    monkeypatch.setenv("KERNEL_HARNESS_CORPUS_CACHE", str(cache))
    where = cache / "org" / "kernels" / "kernel-harness-corpus"
    where.mkdir(parents=True)
    stamp = datetime.datetime.now(datetime.UTC).isoformat().replace(":", "_")
    with zipfile.ZipFile(where / f"{stamp}.zip", "w") as zf:
        for f in nightly.rglob("*"):
            if f.is_file():
                zf.write(f, f.relative_to(nightly).as_posix())
    corpus = open_corpus("github:org/kernels", writable=False)
    assert [e.case["seed"] for e in corpus.entries()] == [5]
    assert not corpus.writable
    with pytest.raises(CorpusError, match="read-only, but this run records"):
        open_corpus("github:org/kernels", writable=True)
    # A corrupt artifact is an error, never an empty corpus that replays nothing.
    (where / f"{stamp}.zip").write_bytes(b"not a zip")
    with pytest.raises(CorpusError, match="github:org/kernels.*invalid"):
        open_corpus("github:org/kernels", writable=False)


def test_corpus_mode_is_one_rule():
    assert corpus_mode("nightly", None) == "off"
    assert corpus_mode("ci", "") == "off"
    assert corpus_mode("ci", "dir") == "read"
    assert corpus_mode("nightly", "dir") == "read-write"
    assert corpus_mode("dev", "dir") == "read-write"
    assert corpus_mode("nightly", "dir", write=False) == "read"
    assert corpus_mode("ci", "dir", write=True) == "read-write"
    with pytest.raises(CorpusError, match="needs a corpus"):
        corpus_mode("nightly", None, write=True)


def test_replay_reports_what_cannot_be_replayed(tmp_path, toy):
    backend = resolve_backend("interpret")
    stale = json.loads(_entry().to_json())
    stale["case"]["no_such_field"] = 1
    stale["id"] = entry_id("toy", "matches-reference", stale["case"], None)
    gone = json.loads(_entry().to_json())
    gone["property"], gone["draws"] = "no-such-property", []
    gone["id"] = entry_id("toy", "no-such-property", gone["case"], [])
    entries = [CorpusEntry.from_json(json.dumps(d)) for d in (stale, gone)]
    results = replay_entries(entries, toy, backend)
    assert [r.status for r in results] == ["ERROR", "ERROR"] and all(r.failed for r in results)
    assert "no longer loads" in results[0].report
    assert "neither matches-reference nor a metamorphic property" in results[1].report
    with pytest.raises(ValueError, match="entries of"):
        replay_entries(entries, get_family("sdpa"), backend)


def test_a_crash_on_a_stored_case_is_a_crash_report(toy):
    (result,) = replay_entries([_entry()], toy, resolve_backend("interpret"),
                               impl=lambda x: 1 / 0, impl_spec="m:boom")
    assert result.status == "CRASH" and result.failed
    assert "ZeroDivisionError" in result.report and "--impl m:boom" in result.report


@pytest.mark.slow
def test_a_metamorphic_failure_is_stored_with_its_draws_and_replayed(tmp_path, monkeypatch):
    monkeypatch.setitem(registry.BUILTIN_FAMILIES, "toy-attention", f"{PK}:TOY_ATTENTION")
    corpus = open_corpus(str(tmp_path), writable=True)
    prop, bug = "invisible-inputs-ignored", f"{PK}:ignores_causal"
    found = run_unit(corpus, "toy-attention", prop, impl_spec=bug, seed=3, max_examples=15,
                     profile="dev")
    assert found.failed and found.recorded
    (entry,) = corpus.entries("toy-attention", prop)
    assert isinstance(entry.draws, list) and entry.draws
    fam, backend = get_family("toy-attention"), resolve_backend("interpret")
    from kernel_harness.records.impl import load_impl

    (bad,) = replay_entries([entry], fam, backend, load_impl(bug), bug)
    assert bad.status == "FAIL", bad.report
    assert f"--property {prop} --draws" in bad.report
    (good,) = replay_entries([entry], fam, backend)
    assert good.status == "PASS", good.report


def test_a_crash_found_by_the_search_is_stored_and_replayed_as_a_crash(tmp_path, toy):
    crashes = "tests.helpers.toy_impls:crashes_at_length_8"
    corpus = open_corpus(str(tmp_path), writable=True)
    found = run_unit(corpus, "toy", "matches-reference", impl_spec=crashes, seed=2,
                     max_examples=20)
    assert found.failed and found.recorded
    (entry,) = corpus.entries()
    assert entry.first_line.startswith("[kernel-harness] CRASH toy")
    assert "NotImplementedError" in entry.first_line and entry.case["length"] == 8
    later = run_unit(corpus, "toy", "matches-reference", impl_spec=crashes, seed=9,
                     max_examples=1)
    assert [r.status for r in later.replayed] == ["CRASH"] and not later.searched
    assert "reproduce: kernel-harness repro toy" in later.replayed[0].report


def test_failure_of_stores_failing_examples_only():
    assert failure_of(ValueError("a harness error")) is None
    case = ToyCase(dtype="float32", seed=0, length=4)
    failure = MetamorphicFailure("[kernel-harness] FAIL toy p\n  more", case=case,
                                 draws_json='[{"value": 1}]')
    assert failure_of(failure) == (case, '[{"value": 1}]', "[kernel-harness] FAIL toy p")
    # Not replayable (a drawn value with no JSON form): not storable, never half-stored.
    assert failure_of(MetamorphicFailure("x", case=case, draws_json=None)) is None


def test_record_failure_stores_every_failure_of_a_group(tmp_path, toy):
    from kernel_harness.orchestration.corpus import record_failure
    from kernel_harness.run.crash import Crash, KernelCrash

    backend = resolve_backend("interpret")

    def crash(length: int) -> KernelCrash:
        return KernelCrash(Crash(family="toy", case=ToyCase(dtype="float32", seed=1,
                                                            length=length),
                                 backend=backend, impl="m:f", impl_spec="m:f",
                                 adjustments=(), error=RuntimeError(f"boom {length}")))

    group = ExceptionGroup("two bugs", [crash(4), ValueError("not an example"),
                                        ExceptionGroup("nested", [crash(8)])])
    corpus = open_corpus(str(tmp_path), writable=True)
    stored = record_failure(corpus, toy, "matches-reference", group, backend, "m:f")
    assert sorted(e.case["length"] for e in stored) == [4, 8]
    assert record_failure(corpus, toy, "matches-reference", group, backend, "m:f") == []
    ro = open_corpus(str(tmp_path), writable=False)
    assert record_failure(ro, toy, "matches-reference", crash(16), backend, "m:f") == []
    assert record_failure(None, toy, "matches-reference", crash(16), backend, "m:f") == []
    assert len(corpus.entries()) == 2
