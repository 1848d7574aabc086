"""The two calls a run makes per (family, property) unit: replay its stored entries before
the search, record its shrunk failure after."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

from kernel_harness.core.backends import Backend
from kernel_harness.orchestration import results
from kernel_harness.orchestration.corpus.entry import CorpusEntry, entry_from_failure, failure_of
from kernel_harness.orchestration.corpus.quarantine import case_problem
from kernel_harness.orchestration.corpus.replay import ReplayResult, replay_entries
from kernel_harness.orchestration.corpus.store import Corpus
from kernel_harness.orchestration.units import UnitResult, verdict_line
from kernel_harness.records.family import Family


def replay_unit(corpus: Corpus | None, family: Family, prop: str | None, backend: Backend,
                impl: Callable[..., Any] | None = None,
                impl_spec: str | None = None) -> list[ReplayResult]:
    """Before the unit's search: every stored entry of (family, prop) replayed once
    (``[]`` without a corpus; ``prop`` None: every property's). Any ``failed`` result is
    the unit's failure; print its ``line()`` and ``report``."""
    if corpus is None:
        return []
    entries = corpus.entries(family.name, prop, check=lambda e: case_problem(e, family))
    return replay_entries(entries, family, backend, impl, impl_spec)


def with_corpus_notes(corpus: Corpus | None, result: UnitResult) -> UnitResult:
    """``result`` with what its unit met in the corpus, in its record: the bad entries the
    replay skipped (:mod:`.quarantine`) as ``corpus_quarantined``; when the store was lost
    (:mod:`.outage`), ``corpus_lost``, ``corpus_not_replayed`` (its entries were not
    replayed) and ``corpus_spilled`` (the ids its failures went to the spill file with).
    Nothing met: unchanged."""
    if corpus is None:
        return result
    unit = (result.family, result.prop)
    notes: dict[str, Any] = {}
    bad = corpus.quarantined_of(*unit)
    if bad:
        notes["corpus_quarantined"] = [b.to_json() for b in bad]
    if corpus.lost is not None:
        notes["corpus_lost"] = corpus.lost.to_json()
        if unit in corpus.not_replayed:
            notes["corpus_not_replayed"] = True
        if corpus.spilled.get(unit):
            notes["corpus_spilled"] = list(corpus.spilled[unit])
    if not notes:
        return result
    return dataclasses.replace(result, record={**result.record, **notes})


def record_failure(corpus: Corpus | None, family: Family, prop: str, error: BaseException,
                   backend: Backend, impl_spec: str | None) -> list[CorpusEntry]:
    """After the unit's search failed with ``error`` (``PropertyOutcome.error``: the
    shrunk example's; with ``all_bugs`` an exception group of several): stores each
    failing example when the corpus is writable. Returns the entries newly stored (none:
    no writable corpus, no failing example in ``error``, or all stored already)."""
    if corpus is None or not corpus.writable:
        return []
    errors = list(error.exceptions) if isinstance(error, BaseExceptionGroup) else [error]
    stored = []
    for one in errors:
        if isinstance(one, BaseExceptionGroup):
            stored += record_failure(corpus, family, prop, one, backend, impl_spec)
            continue
        found = failure_of(one)
        if found is None:
            continue
        case, draws, first_line = found
        entry = entry_from_failure(family=family.name, prop=prop, case=case,
                                   draws_json=draws, first_line=first_line, backend=backend,
                                   impl_spec=impl_spec)
        if corpus.record(entry):
            stored.append(entry)
    return stored


def replayed_failure(replays: list[ReplayResult], family: Family, prop: str,
                     backend: Backend) -> UnitResult | None:
    """The unit's result when a stored entry failed on replay (its report first), else None:
    the unit then goes on to its search."""
    failed = [r for r in replays if r.failed]
    if not failed:
        return None
    first = failed[0]
    summary = first.report.splitlines()[0] if first.report else first.line()
    repro = next((line.strip().removeprefix("reproduce: ") for line in first.report.splitlines()
                  if line.strip().startswith("reproduce: ")), None)
    failure = {"case": json.loads(first.entry.case_json), "case_json": first.entry.case_json,
               "impl": first.entry.impl or "", "summary": [summary], "outputs": [],
               "excluded": {}, "repro": repro, "corpus_entry": first.entry.id}
    seconds = sum(r.seconds for r in replays)
    record = {**results.skip_record(family.name, prop, backend.name, ""), "verdict": "FAIL",
              "reason": None, "examples": len(replays),
              "passed_examples": sum(r.status == "PASS" for r in replays),
              "seconds": round(seconds, 3), "failure": failure}
    text = "\n".join([f"stored corpus entry {r.entry.id} fails again:\n{r.report}"
                      for r in failed] + ["  (the search did not run: a stored failure "
                                          "failed again)"])
    return UnitResult(family=family.name, prop=prop, backend=backend.name, verdict="FAIL",
                      record=record, text=text, label="FAIL (corpus)",
                      line=verdict_line(family.name, prop, "FAIL (corpus)",
                                        f"{len(failed)} of {len(replays)} stored, "
                                        f"{seconds:.1f}s"))


def record_supervised(corpus: Corpus | None, family: Family, prop: str, result: UnitResult,
                      backend: Backend, impl_spec: str | None) -> list[CorpusEntry]:
    """Stores a crash or a hang that the supervisor reported (the worker died or was
    killed on a case) as a matches-reference entry: replaying it runs the same kernel call."""
    failure = result.record.get("failure") or {}
    if corpus is None or not corpus.writable or not failure.get("case_json"):
        return []
    if not (failure.get("crash_signal") or failure.get("timeout_seconds")):
        return []
    case = family.case_type.from_json(failure["case_json"])
    entry = entry_from_failure(family=family.name, prop="matches-reference", case=case,
                               draws_json=None, first_line=failure["summary"][0],
                               backend=backend, impl_spec=impl_spec)
    return [entry] if corpus.record(entry) else []
