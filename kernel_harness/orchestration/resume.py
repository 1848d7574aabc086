"""Resuming a run a signal ended (:mod:`.interrupt`) where it stopped, in the session, so
every front end resumes alike (``check --resume PATH``, ``testing.check(resume=PATH)``,
``pytest --kh-resume PATH``). The units its JSON holds with a final verdict are kept as
they are; the others (INTERRUPTED, or not started) run now, and the two merge into one
document."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kernel_harness.core.errors import UsageError
from kernel_harness.orchestration.results import SCHEMA_VERSION
from kernel_harness.orchestration.units import UnitResult, verdict_line


def load(path: Path, *, backend: str, profile: str) -> list[UnitResult]:
    """The finished units of the ``check --json`` document at ``path`` (not INTERRUPTED,
    not a whole family's ``-`` row), as results; a file that is not such a document, or
    one of another backend or profile, is a :class:`UsageError`."""
    try:
        doc = json.loads(Path(path).read_text())
        env, records = doc["environment"], doc["properties"]
        if doc.get("schema") != "kernel-harness/check-results" or \
                doc.get("schema_version") != SCHEMA_VERSION:
            raise ValueError("not a check-results document of schema version 1")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UsageError(f"--resume {path}: cannot read a `check --json` document: {e}") from None
    for key, want in (("backend", backend), ("profile", profile)):
        if env.get(key) != want:
            raise UsageError(f"--resume {path}: it ran with {key} {env.get(key)}, this run "
                             f"with {want}; give the same {key}")
    out = []
    for rec in records:
        if rec["verdict"] == "INTERRUPTED" or rec["property"] == "-":
            continue
        out.append(UnitResult(family=rec["family"], prop=rec["property"],
                              backend=rec["backend"], verdict=rec["verdict"], record=rec,
                              label=rec["verdict"],
                              line=verdict_line(rec["family"], rec["property"],
                                                rec["verdict"], "from --resume")))
    return out


class Resumed:
    """What a session resumes: the finished units of the document (``kept``) and the run's
    unit order; ``None`` documents keep nothing."""

    def __init__(self, path: str | None, units: list[Any], *, backend: str, profile: str):
        self.path = path
        self.order = [(u.family.name, u.prop) for u in units]
        kept = [] if path is None else load(Path(path), backend=backend, profile=profile)
        #: the finished units of the document that this run has too
        self.kept = [r for r in kept if (r.family, r.prop) in self.order]
        done = {(r.family, r.prop) for r in self.kept}
        self.left = [u for u in units if (u.family.name, u.prop) not in done]

    def line(self) -> str | None:
        """The header line saying what is kept (None when nothing is)."""
        if not self.kept:
            return None
        return (f"--resume {self.path}: {len(self.kept)} finished units kept, "
                f"{len(self.left)} to run")

    def results(self, new: list[UnitResult]) -> list[UnitResult]:
        """The kept units' results and ``new`` in the run's order."""
        return merged(self.kept, new, self.order) if self.kept else new


def merged(kept: list[UnitResult], new: list[UnitResult], order: list[tuple[str, str]],
           ) -> list[UnitResult]:
    """``kept`` and ``new`` in the units' run ``order`` (anything else after)."""
    rank = {unit: i for i, unit in enumerate(order)}
    both = kept + new
    return sorted(both, key=lambda r: rank.get((r.family, r.prop), len(rank)))
