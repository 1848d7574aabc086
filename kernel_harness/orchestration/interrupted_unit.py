"""The result of a unit a signal stopped (:mod:`kernel_harness.orchestration.interrupt`):
verdict ``INTERRUPTED``, with its examples so far and any failure already found (stored in
the corpus, unshrunk, when the run writes one)."""

from __future__ import annotations

import dataclasses
from typing import Any

from kernel_harness.checks.properties import Observer, PropertyOutcome
from kernel_harness.core.backends import Backend
from kernel_harness.orchestration import results
from kernel_harness.orchestration.corpus import Corpus, entry_from_failure
from kernel_harness.orchestration.units import UnitResult, verdict_line

VERDICT = "INTERRUPTED"


def _line(family: str, prop: str, name: str, examples: int, seconds: float) -> str:
    return verdict_line(family, prop, f"{VERDICT} ({name})",
                        f"{examples} examples, {seconds:.1f}s")


def interrupted_result(*, family: str, prop: str, backend: Backend, observer: Observer,
                       seconds: float, name: str, corpus: Corpus | None,
                       impl_spec: str | None) -> tuple[UnitResult, list[str]]:
    """The unit's INTERRUPTED result, and lines to print (the failure it stored)."""
    outcome = PropertyOutcome(family=family, prop=prop, backend=backend, observer=observer,
                              error=RuntimeError(f"interrupted by {name}"),
                              wall_seconds=seconds, shrink=None)
    record: dict[str, Any] = results.outcome_record(outcome)
    found = observer.last_failure
    reason = (f"interrupted by {name} after {observer.examples} examples"
              + (" (a failure was found, not shrunk)" if found is not None else ""))
    record |= {"verdict": VERDICT, "reason": reason,
               "error": {"type": "RunInterrupted", "message": reason}}
    lines = []
    if found is not None and prop == "matches-reference" and corpus is not None \
            and corpus.writable:
        summary = record["failure"]["summary"][0] if record["failure"] else reason
        entry = entry_from_failure(family=family, prop=prop, case=found.case, draws_json=None,
                                   first_line=summary, backend=backend, impl_spec=impl_spec)
        if corpus.record(entry):
            lines.append(f"  corpus: {corpus.kept(entry)} (found before the interrupt, not "
                         "shrunk)")
    text = "" if record["failure"] is None else "\n".join(
        [*record["failure"]["summary"], f"  reproduce: {record['failure']['repro']}",
         "  (not shrunk: the run was interrupted)"])
    return UnitResult(family=family, prop=prop, backend=backend.name, verdict=VERDICT,
                      record=record, text=text, label=f"{VERDICT} ({name})",
                      line=_line(family, prop, name, observer.examples, seconds)), lines


def from_events(*, family: str, prop: str, backend: str, examples: int, seconds: float,
                name: str) -> UnitResult:
    """An INTERRUPTED result from what the supervisor saw of a worker that did not answer
    (its kernel-run events): the examples started, nothing else."""
    reason = f"interrupted by {name} after about {examples} examples (the worker did not answer)"
    record = {**results.skip_record(family, prop, backend, reason), "verdict": VERDICT,
              "examples": examples, "seconds": round(seconds, 3),
              "error": {"type": "RunInterrupted", "message": reason}}
    return UnitResult(family=family, prop=prop, backend=backend, verdict=VERDICT,
                      record=record, label=f"{VERDICT} ({name})",
                      line=_line(family, prop, name, examples, seconds))


def renamed(result: UnitResult, name: str) -> UnitResult:
    """A worker's INTERRUPTED ``result`` naming the signal the run got (``name``), not the
    SIGTERM its supervisor sent the worker."""
    if result.verdict != VERDICT:
        return result

    def fix(text: str) -> str:
        return text.replace("by SIGTERM", f"by {name}").replace("(SIGTERM)", f"({name})")

    record = {**result.record, "reason": fix(result.record.get("reason") or "")}
    if record.get("error"):
        record["error"] = {**record["error"], "message": fix(record["error"]["message"])}
    return dataclasses.replace(result, record=record, label=fix(result.label),
                               line=fix(result.line))
