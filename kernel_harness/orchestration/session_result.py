"""What a check session produced (:class:`SessionResult`): every unit's result, the
``check --json`` document and the final line."""

from __future__ import annotations

import dataclasses
from typing import Any

from kernel_harness.orchestration import results
from kernel_harness.orchestration.configured import KNOWN_BUG
from kernel_harness.orchestration.units import UnitResult
from kernel_harness.run import kernel_coverage


@dataclasses.dataclass(frozen=True)
class SessionResult:
    """Every unit's result, in order, then the SKIP results of unrunnable families."""

    #: The :class:`~kernel_harness.orchestration.session.CheckSession` that ran (not
    #: imported here: session imports this module).
    session: Any
    results: list[UnitResult]
    #: Lines for the end of the summary (tpu-interpret diagnostics).
    notes: list[str] = dataclasses.field(default_factory=list)
    #: Kernel-branch coverage (``kernel_coverage``; :mod:`kernel_harness.run.kernel_coverage`).
    coverage: Any = None
    #: The signal that interrupted the run (None: it ran to its end), and the units it
    #: did not start (``--resume`` runs them).
    interrupted: str | None = None
    not_started: list[str] = dataclasses.field(default_factory=list)

    @property
    def ran(self) -> list[UnitResult]:
        """The units that ran (not SKIP, not NOT RUN)."""
        return [r for r in self.results if r.ran]

    @property
    def ok(self) -> bool:
        """At least one unit ran and every unit that ran passed: a run that compared
        nothing is never green."""
        return (bool(self.ran) and all(r.verdict == "PASS" for r in self.ran)
                and not results.only_fallbacks([r.record for r in self.ran]))

    def records(self) -> list[dict[str, Any]]:
        """The records of the results schema, one per unit."""
        return [r.record for r in self.results]

    def document(self) -> dict[str, Any]:
        """The whole ``check --json`` document."""
        s = self.session
        adjustments = {"without": sorted(s.without), "tolerance": list(s.request.tolerance),
                       "tolerance_scale": s.request.tolerance_scale}
        origins = getattr(s, "without_origins", {})
        configured = {f: sorted(k for k, why in o.items() if not why.startswith(KNOWN_BUG))
                      for f, o in origins.items()}
        bugs = {f: {k: why for k, why in o.items() if why.startswith(KNOWN_BUG)}
                for f, o in origins.items()}
        if any(configured.values()):
            adjustments["without_config"] = {f: v for f, v in configured.items() if v}
        if any(bugs.values()):
            adjustments["known_bugs"] = {f: v for f, v in bugs.items() if v}
        env = results.environment(s.backend, profile=s.request.profile, seed=s.request.seed,
                                  max_examples=s.request.max_examples, impl=s.impl_label,
                                  adjustments=adjustments, origins=s.request.origins)
        doc = results.document(env, self.records())
        if self.coverage is not None:
            doc["kernel_coverage"] = kernel_coverage.run_json(self.coverage, s.families)
        if self.interrupted is not None:
            doc["interrupted"] = {"signal": self.interrupted, "not_started": self.not_started}
        if s.corpus is not None:
            doc["corpus"] = self._corpus_json()
        return doc

    def _corpus_json(self) -> dict[str, Any]:
        """The JSON's ``corpus``: where, how, the bad entries skipped and, when its store
        was lost (here or in a worker), when, the spill file and what was not replayed."""
        s, records = self.session, self.records()
        bad = {b["id"]: b for r in records for b in r.get("corpus_quarantined", [])}
        out: dict[str, Any] = {"location": s.corpus.location, "mode": s.corpus_mode,
                               "quarantined": list(bad.values())}
        losses = [r["corpus_lost"] for r in records if r.get("corpus_lost")]
        if s.corpus.lost is not None:
            losses.append(s.corpus.lost.to_json())
        if losses:
            spilled = [i for r in records for i in r.get("corpus_spilled", [])]
            spilled += [i for ids in s.corpus.spilled.values() for i in ids]
            out["lost"] = min(losses, key=lambda lost: lost["at"])
            out["spill"] = s.request.corpus_spill
            out["spilled"] = sorted(set(spilled))
            out["not_replayed"] = [f"{r['family']} {r['property']}" for r in records
                                   if r.get("corpus_not_replayed")]
        return out

    def corpus_lines(self) -> list[str]:
        """For the end of the summary: when the store was lost, what was not replayed and
        where the new failures are (none lost: ``[]``)."""
        doc = self._corpus_json() if self.session.corpus is not None else {}
        if "lost" not in doc:
            return []
        lost, spilled = doc["lost"], doc["spilled"]
        keep = (f"{len(spilled)} new failure(s) kept in {doc['spill']}: `kernel-harness corpus "
                f"push {doc['spill']} LOCATION` delivers them" if spilled
                else "no new failure to keep")
        return [f"corpus {doc['location']} LOST at {lost['at']} ({lost['reason']}); "
                f"{len(doc['not_replayed'])} unit(s) not replayed; {keep}"]

    def final_line(self) -> str:
        """``PASS: 40/40 properties passed on backend interpret``."""
        passed = sum(r.verdict == "PASS" for r in self.ran)
        why = (" (every counted example ran a declared fallback, no Pallas kernel: not green)"
               if results.only_fallbacks([r.record for r in self.ran]) else "")
        return (f"{'PASS' if self.ok else 'FAIL'}: {passed}/{len(self.ran)} properties passed "
                f"on backend {self.session.backend.name}{why}")
