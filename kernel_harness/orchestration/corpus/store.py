"""Where corpus entries live: Hypothesis's example databases, holding the harness's JSON.

Each (family, property) unit has its own database key; its values are the entries'
canonical JSON (:class:`~kernel_harness.orchestration.corpus.entry.CorpusEntry`). One more key,
the index, names the units that have entries, so a corpus can be listed on every
database kind (none of them enumerates its keys). A database keeps a set of values per
key and writes each value atomically (a file renamed into place; a Redis ``SADD``), so
several processes may record into one corpus at once.

LOCATION (``open_corpus``), one or several joined by ``,`` (read through
``MultiplexedDatabase``; a record goes to every writable one):

- ``PATH``: a directory (``DirectoryBasedExampleDatabase``); created when writing;
- ``redis://HOST[:PORT][/DB]``: a shared Redis (``RedisExampleDatabase``); ``rediss://``
  for TLS, credentials and TLS options as :mod:`.location` says (the password best from
  ``$KH_CORPUS_PASSWORD``; every output shows the location redacted);
- ``github:OWNER/REPO[/ARTIFACT]``: the newest GitHub Actions artifact of that name
  (default ``kernel-harness-corpus``) holding a corpus directory
  (``GitHubArtifactDatabase``; needs ``GITHUB_TOKEN`` for a private repository; cached
  under ``$KERNEL_HARNESS_CORPUS_CACHE`` or ``~/.cache/kernel-harness/corpus-artifacts``
  for a day); always read-only;
- ``ro:`` before any of them: read it, never write it (``ReadOnlyDatabase``).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal

from hypothesis.database import (
    DirectoryBasedExampleDatabase,
    ExampleDatabase,
    GitHubArtifactDatabase,
    MultiplexedDatabase,
    ReadOnlyDatabase,
)
from hypothesis.errors import HypothesisWarning

from kernel_harness.orchestration.corpus.entry import CorpusEntry, CorpusError
from kernel_harness.orchestration.corpus.location import SCHEMES, redact, redis_database, scrub
from kernel_harness.orchestration.corpus.outage import Lost, Outage, StoreUnreachable, spill
from kernel_harness.orchestration.corpus.quarantine import MAX_ENTRY_BYTES, BadEntry

#: A check of an entry (its case against its family): "" if usable, else why not.
Check = Callable[[CorpusEntry], str]

_PREFIX = b"kernel-harness-corpus/v1/"
_INDEX = _PREFIX + b"index"
#: A Redis key expires this long after its last read or write (RedisExampleDatabase
#: always sets one); every replay reads it, so entries stay until dropped.
REDIS_EXPIRY = datetime.timedelta(days=3650)
DEFAULT_ARTIFACT = "kernel-harness-corpus"

ACCEPTED = ("a directory PATH, redis://HOST[:PORT][/DB], rediss://... (TLS), "
            "github:OWNER/REPO[/ARTIFACT], "
            "any of them after ro: (read-only), or several joined by ','")

#: What a run does with a corpus: nothing, replay its entries, or also record failures.
CorpusMode = Literal["off", "read", "read-write"]


def corpus_mode(profile_name: str, location: str | None, *,
                write: bool | None = None) -> CorpusMode:
    """The one rule for what a run does with a corpus.

    Nothing unless a corpus is configured (``location`` None or empty: ``off``, so no
    hidden state makes two runs differ). With one: the ``ci`` profile reads (replays
    its entries first), ``nightly`` and ``dev`` read and write (record each unit's
    shrunk failure). ``write`` (an explicit flag) overrides the profile's choice."""
    if not location:
        if write:
            raise CorpusError("writing to a corpus needs a corpus: give --corpus LOCATION")
        return "off"
    if write is None:
        write = profile_name != "ci"
    return "read-write" if write else "read"


def _unit_key(family: str, prop: str) -> bytes:
    return _PREFIX + f"unit/{family}/{prop}".encode()


class Corpus:
    """A failure corpus over one (possibly multiplexed) example database.

    With an :class:`~.outage.Outage` policy (a run's corpus) a store that stops answering
    is :attr:`lost`, not an error: reads then find nothing (the unit is noted in
    :attr:`not_replayed`) and records go to the spill file (:attr:`spilled`)."""

    def __init__(self, db: ExampleDatabase | None, *, location: str, writable: bool,
                 outage: Outage | None = None, lost: Lost | None = None):
        self.db = db
        self.location = location
        self.writable = writable
        #: Bad entries met so far, by :attr:`BadEntry.id` (:mod:`.quarantine`).
        self.quarantined: dict[str, BadEntry] = {}
        self.outage = outage
        #: When and why the store stopped answering (None: it answers).
        self.lost: Lost | None = None
        #: The units whose entries were not replayed, and the ids spilled per unit.
        self.not_replayed: set[tuple[str, str]] = set()
        self.spilled: dict[tuple[str, str], list[str]] = {}
        if lost is not None:
            self._lose(lost)

    def _lose(self, lost: Lost) -> None:
        if self.lost is None:
            self.lost = lost
            if self.outage is not None:
                self.outage.announce(lost.line(self.location, self.outage.spill,
                                               writable=self.writable))

    def _survive(self, e: StoreUnreachable) -> None:
        """The store stopped answering: an error without an outage policy, else lost."""
        if self.outage is None:
            raise e
        self._lose(Lost.now(str(e).removeprefix(f"corpus {self.location}: ")))

    def __repr__(self) -> str:
        return f"Corpus({self.location!r}, writable={self.writable})"

    def _fetch(self, key: bytes) -> list[bytes]:
        with _loud(self.location):
            return list(self.db.fetch(key))

    def _require_writable(self, what: str) -> None:
        if not self.writable:
            raise CorpusError(f"corpus {self.location} is open read-only; {what} needs a "
                              "writable one")

    def units(self) -> list[tuple[str, str]]:
        """The (family, property) units holding entries, sorted."""
        out = set()
        for raw in self._fetch(_INDEX):
            try:
                family, prop = json.loads(raw)
                if not (isinstance(family, str) and isinstance(prop, str)):
                    raise TypeError("not two names")
            except (ValueError, TypeError):
                self._quarantine(BadEntry(family="(index)", prop="-", key=_INDEX, raw=raw,
                                          reason=f"a malformed index value {raw[:80]!r}"))
                continue
            out.add((family, prop))
        return sorted(out)

    def _quarantine(self, bad: BadEntry) -> None:
        self.quarantined.setdefault(bad.id, bad)

    def quarantined_of(self, family: str, prop: str) -> list[BadEntry]:
        """The bad entries of (family, prop) met so far (:mod:`.quarantine`)."""
        return [b for b in self.quarantined.values() if (b.family, b.prop) == (family, prop)]

    def _stored(self, family: str, prop: str,
                check: Check | None = None) -> list[tuple[bytes, CorpusEntry]]:
        out = []
        key = _unit_key(family, prop)
        for raw in self._fetch(key):
            try:
                if len(raw) > MAX_ENTRY_BYTES:
                    raise CorpusError(f"{len(raw)} bytes, past the limit of {MAX_ENTRY_BYTES}")
                entry = CorpusEntry.from_json(raw)
                if (entry.family, entry.prop) != (family, prop):
                    raise CorpusError(f"an entry of {entry.family} {entry.prop} stored under "
                                      f"{family} {prop}")
                problem = check(entry) if check is not None else ""
                if problem:
                    raise CorpusError(problem)
            except CorpusError as e:
                self._quarantine(BadEntry(family=family, prop=prop, key=key, raw=raw,
                                          reason=str(e)))
                continue
            out.append((raw, entry))
        return out

    def entries(self, family: str | None = None, prop: str | None = None,
                check: Check | None = None) -> list[CorpusEntry]:
        """The stored entries (of ``family`` and ``prop`` where given), one per id (the
        earliest recorded where two processes stored the same failure at once), in a
        stable order: unit, then date, then id. A bad one (:mod:`.quarantine`; with
        ``check``, also one for which it returns a reason) is left out and kept in
        :attr:`quarantined`."""
        found: dict[str, CorpusEntry] = {}
        try:
            if self.lost is None:
                for fam, p in self.units():
                    if (family is not None and fam != family) or (prop is not None
                                                                  and p != prop):
                        continue
                    for _, entry in self._stored(fam, p, check):
                        if entry.id not in found or entry.date < found[entry.id].date:
                            found[entry.id] = entry
        except StoreUnreachable as e:
            self._survive(e)
        if self.lost is not None:
            self.not_replayed.add((family or "*", prop or "*"))
            return []
        return sorted(found.values(), key=lambda e: (e.family, e.prop, e.date, e.id))

    def record(self, entry: CorpusEntry) -> bool:
        """Stores ``entry``; False when its failure (its id) is stored already."""
        self._require_writable("recording a failure")
        try:
            if self.lost is None:
                if any(e.id == entry.id for _, e in self._stored(entry.family, entry.prop)):
                    return False
                with _loud(self.location):
                    self.db.save(_unit_key(entry.family, entry.prop), entry.to_json().encode())
                    self.db.save(_INDEX, json.dumps([entry.family, entry.prop]).encode())
                return True
        except StoreUnreachable as e:
            self._survive(e)
        assert self.outage is not None  # lost implies an outage policy
        if not spill(self.outage.spill, entry):
            return False
        self.spilled.setdefault((entry.family, entry.prop), []).append(entry.id)
        return True

    def kept(self, entry: CorpusEntry) -> str:
        """Where :meth:`record` put ``entry``: ``stored ID``, or ``kept ID in the spill file
        PATH (the store is lost)``."""
        if entry.id in self.spilled.get((entry.family, entry.prop), ()):
            assert self.outage is not None
            return f"kept {entry.id} in the spill file {self.outage.spill} (the store is lost)"
        return f"stored {entry.id}"

    def find(self, id_or_prefix: str) -> CorpusEntry:
        """The entry whose id is or starts with ``id_or_prefix`` (at least 4 characters);
        none or several is a :class:`CorpusError`."""
        if len(id_or_prefix) < 4:
            raise CorpusError(f"entry id {id_or_prefix!r}: give at least 4 characters")
        hits = [e for e in self.entries() if e.id.startswith(id_or_prefix)]
        if len(hits) != 1:
            what = "no entry" if not hits else f"{len(hits)} entries"
            raise CorpusError(f"corpus {self.location}: {what} with id {id_or_prefix!r} "
                              "(`kernel-harness corpus list` shows them)")
        return hits[0]

    def drop_bad(self, bad: BadEntry) -> None:
        """Removes one bad entry (its stored bytes) and, when its unit holds nothing
        else, the unit from the index."""
        self._require_writable("dropping an entry")
        with _loud(self.location):
            self.db.delete(bad.key, bad.raw)
            if bad.key != _INDEX and not self._fetch(bad.key):
                self.db.delete(_INDEX, json.dumps([bad.family, bad.prop]).encode())

    def drop(self, id_or_prefix: str) -> CorpusEntry | BadEntry:
        """Removes one entry (every stored copy of it) and returns it; a bad entry
        (:attr:`quarantined`, after a read) is found by its :attr:`BadEntry.id`."""
        self._require_writable("dropping an entry")
        self.entries()
        bad = [b for b in self.quarantined.values()
               if len(id_or_prefix) >= 4 and b.id.startswith(id_or_prefix)]
        if len(bad) == 1:
            self.drop_bad(bad[0])
            return bad[0]
        entry = self.find(id_or_prefix)
        with _loud(self.location):
            for raw, stored in self._stored(entry.family, entry.prop):
                if stored.id == entry.id:
                    self.db.delete(_unit_key(entry.family, entry.prop), raw)
            if not self._stored(entry.family, entry.prop):
                self.db.delete(_INDEX, json.dumps([entry.family, entry.prop]).encode())
        return entry


@contextlib.contextmanager
def _loud(location: str) -> Iterator[None]:
    """Hypothesis's databases warn and carry on empty (an artifact that cannot be had, a
    corrupt zip): for a corpus that would replay nothing and call it a pass."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", HypothesisWarning)
        try:
            yield
        except HypothesisWarning as e:
            raise StoreUnreachable(f"corpus {location}: {e}") from None
        except OSError as e:
            raise StoreUnreachable(f"corpus {location}: {type(e).__name__}: {e}") from None
        except Exception as e:
            if type(e).__module__.startswith("redis"):
                import redis

                kind = (StoreUnreachable if isinstance(e, (redis.ConnectionError,
                                                           redis.TimeoutError))
                        else CorpusError)
                raise kind(f"corpus {location}: redis: {e}") from None
            raise


def open_corpus(location: str, *, writable: bool, outage: Outage | None = None) -> Corpus:
    """Opens the corpus at ``location`` (see the module docstring for the forms). With
    ``writable`` at least one part must be writable, and a directory is created; without
    it every part is read-only. Each part is reached now (a directory checked, a Redis
    pinged, an artifact fetched), so a bad LOCATION is a :class:`CorpusError`, one line
    saying what is accepted, before any kernel runs. A store that does not answer is one
    too, unless ``outage`` says the run goes on without it (:mod:`.outage`): then the
    corpus starts lost."""
    try:
        parts = [p.strip() for p in str(location).split(",")]
        if not location or not all(parts):
            raise CorpusError(f"--corpus {location!r}: empty; give {ACCEPTED}")
        try:
            opened = [_open_part(p, writable=writable) for p in parts]
            if writable and not any(w for _, w in opened):
                raise CorpusError(f"--corpus {redact(location)}: read-only, but this run "
                                  "records failures (give a writable directory or redis:// "
                                  "as well)")
            dbs = [db for db, _ in opened]
            db = dbs[0] if len(dbs) == 1 else MultiplexedDatabase(*dbs)
            corpus = Corpus(db, location=redact(location), writable=writable, outage=outage)
            corpus.units()  # reach every part now
        except StoreUnreachable as e:
            if outage is None:
                raise
            if outage.required:
                raise CorpusError(f"{e} (--require-corpus: nothing ran; without it the run "
                                  "goes on and keeps new failures in a spill file)") from None
            reason = scrub(str(e), location).split(": ", 1)[-1]
            corpus = Corpus(None, location=redact(location), writable=writable,
                            outage=outage, lost=Lost.now(reason))
    except CorpusError as e:
        raise type(e)(scrub(str(e), location)) from None
    return corpus


def _open_part(part: str, *, writable: bool) -> tuple[ExampleDatabase, bool]:
    read_only = part.startswith("ro:")
    spec = part[3:] if read_only else part
    if spec.startswith("github:"):
        db, can_write = _github(spec), False
    elif spec.startswith(SCHEMES):
        db, can_write = _redis(spec), True
    elif "://" in spec or spec.startswith("ro:") or not spec:
        raise CorpusError(f"--corpus {redact(part)!r}: not a corpus location; give {ACCEPTED}")
    else:
        db, can_write = _directory(spec, create=writable and not read_only), True
    can_write = can_write and writable and not read_only
    return (db if can_write else ReadOnlyDatabase(db)), can_write


def _directory(spec: str, *, create: bool) -> ExampleDatabase:
    path = Path(spec).expanduser()
    if path.exists() and not path.is_dir():
        raise CorpusError(f"--corpus {spec}: exists and is not a directory")
    if create:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise CorpusError(f"--corpus {spec}: cannot create it: {e.strerror}") from None
        if not os.access(path, os.W_OK | os.X_OK):
            raise CorpusError(f"--corpus {spec}: not writable")
    elif not path.is_dir():
        raise CorpusError(f"--corpus {spec}: no such directory (a corpus read-only must "
                          "exist; a run that writes creates it)")
    return DirectoryBasedExampleDatabase(path)


def _redis(spec: str) -> ExampleDatabase:
    return redis_database(spec, REDIS_EXPIRY)  # type: ignore[no-any-return]


def _github(spec: str) -> ExampleDatabase:
    fields = spec[len("github:"):].split("/")
    if any(c in spec[len("github:"):] for c in "@:?"):
        raise CorpusError("--corpus github:...: give github:OWNER/REPO[/ARTIFACT]; its token "
                          "is read from $GITHUB_TOKEN only, never from the location")
    if len(fields) not in (2, 3) or not all(fields):
        raise CorpusError(f"--corpus {spec}: give github:OWNER/REPO[/ARTIFACT]")
    owner, repo = fields[:2]
    artifact = fields[2] if len(fields) == 3 else DEFAULT_ARTIFACT
    root = os.environ.get("KERNEL_HARNESS_CORPUS_CACHE")
    cache = (Path(root) if root else Path.home() / ".cache" / "kernel-harness"
             / "corpus-artifacts") / owner / repo / artifact
    return GitHubArtifactDatabase(owner, repo, artifact_name=artifact, path=cache)
