"""The store is not the run: a corpus that cannot be reached, at the start or in the middle
of a run, does not end it.

A run opens its corpus with an :class:`Outage` policy. When the store cannot be reached
(a Redis server gone, a connection refused or timed out, a directory on a vanished mount,
an artifact that cannot be fetched) the corpus is *lost* for the rest of that process: one
line says when and why, units from then on are not replayed (and say so), and each new
failure is appended to the **spill file**, a JSON-lines file of corpus entries beside the
run's results. ``kernel-harness corpus push SPILL LOCATION`` delivers them later. With
``required`` (``--require-corpus``) a store that cannot be reached at the start is a usage
error (exit 2) before any kernel runs. A wrong password or a malformed location is never an
outage: those are errors whatever the policy.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import fcntl
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kernel_harness.orchestration.corpus.entry import CorpusEntry, CorpusError
from kernel_harness.run.report import PREFIX

#: The spill file's name when a run writes no ``--json`` or ``--junit`` to put it beside.
DEFAULT_SPILL = "kernel-harness-corpus-spill.jsonl"


class StoreUnreachable(CorpusError):
    """The corpus's store did not answer (connection refused, timed out, I/O error): an
    outage, which a run survives (:class:`Outage`), unlike a malformed location."""


@dataclasses.dataclass(frozen=True)
class Outage:
    """What a run does when its corpus's store cannot be reached.

    ``spill``: the spill file new failures go to while the store is lost; ``required``: a
    store unreachable at the start is an error instead; ``announce``: prints the one line
    that says the store was lost."""

    spill: str = DEFAULT_SPILL
    required: bool = False
    announce: Callable[[str], None] = print


@dataclasses.dataclass(frozen=True)
class Lost:
    """When (UTC, ISO 8601 to the second) and why the store was lost."""

    at: str
    reason: str

    @classmethod
    def now(cls, reason: str) -> Lost:
        """Lost at this moment, for ``reason``."""
        stamp = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
        return cls(at=stamp.isoformat(), reason=reason)

    def line(self, location: str, spill: str, *, writable: bool) -> str:
        """``[kernel-harness] corpus LOST ...``: what happened and what the run does now."""
        keep = (f"new failures go to the spill file {spill} (`kernel-harness corpus push "
                f"{spill} LOCATION` delivers them)" if writable else "nothing is recorded")
        return (f"{PREFIX} corpus LOST at {self.at}: {location}: {self.reason}; the run "
                f"goes on: units from now on are not replayed, {keep}")

    def to_json(self) -> dict[str, str]:
        """``{"at", "reason"}``."""
        return {"at": self.at, "reason": self.reason}


def spill_path_for(json_path: Any = None, junit_path: Any = None) -> str:
    """The spill file beside the run's results: ``r.json`` -> ``r.corpus-spill.jsonl``
    (``--junit``'s when there is no ``--json``; else :data:`DEFAULT_SPILL` in the working
    directory); absolute, so a worker process writes the same file."""
    given = json_path if json_path is not None else junit_path
    if given is None:
        return str(Path(DEFAULT_SPILL).resolve())
    path = Path(given)
    return str((path.parent / f"{path.stem}.corpus-spill.jsonl").resolve())


@contextlib.contextmanager
def _locked(path: Path, mode: str) -> Iterator[Any]:
    with path.open(mode, encoding="utf-8") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield f
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def read_spill(path: str | Path) -> list[CorpusEntry]:
    """The entries of a spill file, in order, one per id; a line that is not an entry
    (a hand edit, a truncated write) is a :class:`CorpusError` naming its line number."""
    file = Path(path)
    if not file.is_file():
        raise CorpusError(f"spill file {path}: no such file (a run names its spill file in "
                          "its corpus LOST line and in its JSON's corpus.spill)")
    out: dict[str, CorpusEntry] = {}
    with _locked(file, "r") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                entry = CorpusEntry.from_json(line)
            except CorpusError as e:
                raise CorpusError(f"spill file {path}, line {number}: {e}") from None
            out.setdefault(entry.id, entry)
    return list(out.values())


def spill(path: str | Path, entry: CorpusEntry) -> bool:
    """Appends ``entry`` to the spill file (created when missing; several processes may
    append at once); False when its id is there already."""
    file = Path(path)
    file.parent.mkdir(parents=True, exist_ok=True)
    with _locked(file, "a+") as f:
        f.seek(0)
        for line in f:
            with contextlib.suppress(ValueError):
                if json.loads(line).get("id") == entry.id:
                    return False
        f.write(entry.to_json() + "\n")
    return True
