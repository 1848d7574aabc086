"""``check --resume PATH``: a run a signal ended (:mod:`.interrupt`) continues where it
stopped. The units its JSON holds with a final verdict are kept as they are; the others
(INTERRUPTED, or not started) run now, and the two merge into one document."""

from __future__ import annotations

import json
from pathlib import Path

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


def merged(kept: list[UnitResult], new: list[UnitResult], order: list[tuple[str, str]],
           ) -> list[UnitResult]:
    """``kept`` and ``new`` in the units' run ``order`` (anything else after)."""
    rank = {unit: i for i, unit in enumerate(order)}
    both = kept + new
    return sorted(both, key=lambda r: rank.get((r.family, r.prop), len(rank)))
