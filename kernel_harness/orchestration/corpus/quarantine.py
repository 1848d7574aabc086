"""Bad corpus entries: skipped with one line and counted, never fatal to a run.

An entry is *bad* when its bytes are not valid JSON, not a corpus entry, of a format
version this harness does not read, fail their hash (the id does not match the contents:
edited or corrupt), are stored under another unit, exceed the harness's case limits, or
hold a case its family's case type refuses (the case type's own checks). A run skips
each bad entry of a unit it runs with one line (:meth:`BadEntry.line`) and counts it in
its JSON (``corpus_quarantined``); the unit runs as if it were absent.
``kernel-harness corpus check`` lists every bad entry, ``corpus drop --bad`` removes them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

from kernel_harness.orchestration.corpus.entry import CorpusEntry
from kernel_harness.records.family import Family
from kernel_harness.run.report import PREFIX

#: The largest stored entry read (bytes): a real one is well under 2 KiB.
MAX_ENTRY_BYTES = 64 * 1024
#: The largest integer a case field other than a seed may hold: no dimension of a
#: checked case comes near it, and a case past it would exhaust the worker's memory.
MAX_CASE_INT = 2**24


@dataclasses.dataclass(frozen=True, kw_only=True)
class BadEntry:
    """One stored value that is not a usable entry of its unit, and why."""

    family: str
    prop: str
    #: The database key it is stored under and its bytes (what ``drop`` deletes).
    key: bytes
    raw: bytes
    reason: str

    @property
    def id(self) -> str:
        """16 hex digits of sha256 over the stored bytes (a bad entry may have no id of
        its own, or a forged one)."""
        return hashlib.sha256(self.raw).hexdigest()[:16]

    def line(self, location: str) -> str:
        """``[kernel-harness] corpus QUARANTINED toy matches-reference entry ...: why; ...``."""
        return (f"{PREFIX} corpus QUARANTINED {self.family} {self.prop} entry {self.id}: "
                f"{self.reason}; skipped (`kernel-harness corpus drop {self.id} --corpus "
                f"{location}` removes it, `corpus check` lists every bad entry)")

    def to_json(self) -> dict[str, Any]:
        """``{"id", "family", "property", "reason"}`` for the results JSON."""
        return {"id": self.id, "family": self.family, "property": self.prop,
                "reason": self.reason}


def _ints(value: Any, path: str) -> list[tuple[str, int]]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [(path, value)]
    if isinstance(value, list | tuple):
        return [hit for i, v in enumerate(value) for hit in _ints(v, f"{path}[{i}]")]
    if isinstance(value, dict):
        return [hit for k, v in value.items() for hit in _ints(v, f"{path}.{k}")]
    return []


def case_problem(entry: CorpusEntry, family: Family) -> str:
    """Why ``entry``'s case cannot be replayed on ``family`` ("" if it can): past the case
    limits (:data:`MAX_CASE_INT` in a field that is not a seed), or refused by the family's
    case type (an unknown field, a value its checks reject)."""
    for name, value in entry.case.items():
        if name.endswith("seed"):
            continue
        for path, number in _ints(value, name):
            if abs(number) > MAX_CASE_INT:
                return (f"case field {path} = {number} is past the case limit "
                        f"{MAX_CASE_INT} (a corrupt or hostile entry)")
    try:
        family.case_type.from_json(json.dumps(entry.case))
    except (ValueError, TypeError) as e:
        return f"its case does not load as {family.case_type.__name__}: {e}"
    return ""
