"""One check session under every front end: ``kernel-harness check``, ``pytest --kh-check``
and :func:`kernel_harness.testing.check` all run a :class:`CheckSession`.

A session resolves a :class:`CheckRequest` once (families, narrowing, tolerance
overrides, backend support with skips as data, the implementation and its signature,
the profile and shrink budget), then runs *units* (one family x one property) and
returns a :class:`UnitResult` per unit: a verdict, the JSON record of the results
schema, the failure report text and one summary line, identical whichever front end
asked. Units run in this process, or in worker processes (``isolate``, ``timeout``,
``jobs``: :mod:`~kernel_harness.orchestration.supervisor`,
:mod:`~kernel_harness.orchestration.parallel`)
where a hang or a native crash of the kernel becomes a report like any other failure.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from kernel_harness.checks.modes import modes_first
from kernel_harness.checks.properties import (
    PROPERTIES,
    Observer,
    build_property,
    is_property,
    properties_of,
    run_property,
)
from kernel_harness.core.backends import Backend, BackendUnavailable, resolve_backend
from kernel_harness.core.errors import PropertyNotApplicable, UsageError
from kernel_harness.orchestration import (
    configured,
    interrupt,
    outcome_text,
    parallel,
    results,
    resume,
    session_header,
    watch,
)
from kernel_harness.orchestration.corpus import (
    Outage,
    ReplayResult,
    corpus_mode,
    open_corpus,
    record_failure,
    replay_unit,
)
from kernel_harness.orchestration.corpus.unit import (
    record_supervised,
    replayed_failure,
    with_corpus_notes,
)
from kernel_harness.orchestration.interrupted_unit import interrupted_result
from kernel_harness.orchestration.request import CheckRequest
from kernel_harness.orchestration.session_result import SessionResult
from kernel_harness.orchestration.supervisor import Supervisor
from kernel_harness.orchestration.units import FAILED_VERDICTS as FAILED
from kernel_harness.orchestration.units import Unit, UnitResult, position_line, verdict_line
from kernel_harness.records import registry
from kernel_harness.records.family import Family
from kernel_harness.records.impl import load_impl
from kernel_harness.records.narrow import adjust_tolerances
from kernel_harness.run import compile_cache, diagnostics, impl_source, kernel_coverage
from kernel_harness.run.impl_probe import bind_impl, impl_spec_of
from kernel_harness.run.profiles import PROFILE_NAMES, draws_per_compile, get_profile, short_name
from kernel_harness.run.profiles import shrink_budget as profile_shrink_budget
from kernel_harness.run.runner import ensure_supported
from kernel_harness.run.shard import shard_seed, shard_units

Emit = Callable[[str], None]
#: The per-example time limit of a run with a collective family (Family.devices > 1) when
#: none is given: a deadlock is common there, and must end as a hang report.
COLLECTIVE_TIMEOUT = 300.0


def default_example_timeout(families: Sequence[Family]) -> float | None:
    """The per-example time limit when none is given: :data:`COLLECTIVE_TIMEOUT` where a
    family is a collective (``Family.devices > 1``), else none."""
    return COLLECTIVE_TIMEOUT if any(f.devices > 1 for f in families) else None


def _print(line: str) -> None:
    print(line, flush=True)


class CheckSession:
    """A resolved :class:`CheckRequest`: its backend, families, implementation and units.

    Constructing it does all checking of the request (a bad name, an impossible impl
    signature, a backend that cannot run a named family: :class:`UsageError`) before any
    kernel runs."""

    def __init__(self, request: CheckRequest, *, emit: Emit = _print) -> None:
        self.request = request
        self.emit = emit
        if request.max_examples is not None and request.max_examples < 1:
            raise UsageError("--max-examples must be at least 1")
        if (request.timeout or 0) < 0:
            raise UsageError("--timeout must be positive (0 turns the limit off)")
        if short_name(request.profile) is None:
            raise UsageError(f"unknown profile {request.profile!r}; choose one of: "
                             f"{', '.join(PROFILE_NAMES)}")
        self.profile_name = short_name(request.profile)
        self.profile = get_profile(request.profile)
        self.shrink_budget = request.shrink_budget or profile_shrink_budget(request.profile)
        self.draws_per_compile = (request.draws_per_compile
                                  if request.draws_per_compile is not None
                                  else draws_per_compile(request.profile))
        if self.draws_per_compile < 1:
            raise UsageError("--draws-per-compile must be at least 1")
        if request.jobs < 1:
            raise UsageError(f"--jobs must be at least 1, got {request.jobs}")
        self.timeout = 900.0 if request.timeout is None and self.profile_name == "nightly" \
            else request.timeout
        self.modes_first = modes_first(self.profile_name, request.modes_first)
        self.cache_note = compile_cache.enable(request.compile_cache)
        try:
            self.backend: Backend = resolve_backend(request.backend, note=request.backend_note)
        except (ValueError, BackendUnavailable) as e:
            raise UsageError(str(e)) from None
        if request.kernel_coverage:
            kernel_coverage.check_backend(self.backend.name)
        #: Installed families that do not import (a broken plugin), in an every-family run:
        #: an ERROR each, while the others run (a named one is a usage error).
        self.broken: list[tuple[str, str]] = []
        families = self._families()
        configured.check_family_names(request, registry.family_names())
        if self.timeout is None:  # a deadlocked collective: a hang report
            self.timeout = default_example_timeout(families)
        unknown = [p for p in request.properties if not is_property(p, families)]
        if unknown:
            relations = sorted({r.name for f in families for r in f.relations})
            raise UsageError(f"unknown property {unknown[0]!r}; choose from: "
                             f"{', '.join([*PROPERTIES, *relations])}")
        self.impl, self.impl_spec = self._impl(len(families))
        self.impl_label = (None if self.impl is None
                           else self.impl_spec or outcome_text.impl_label(self.impl))
        self.without, self.impl, self.declared_note = configured.accepted(request, self.impl)
        self.families: list[Family] = []
        self.skipped: list[tuple[Family, str]] = []
        self.without_origins: dict[str, dict[str, str]] = {}  # the configuration's, by family
        self.user_waivers = configured.user_waivers(request)  # in force while a unit runs
        for fam in families:
            fam, self.without_origins[fam.name] = configured.narrow_family(fam, self.without,
                                                                           request)
            fam = adjust_tolerances(fam, list(request.tolerance), request.tolerance_scale)
            try:
                # An isolated run's devices are its worker's (which has a heartbeat file).
                ensure_supported(fam, self.backend, devices=not self.isolated
                                 or self.request.heartbeat_file is not None)
            except BackendUnavailable as e:
                if request.families:
                    raise UsageError(str(e)) from None
                self.skipped.append((fam, str(e)))
                continue
            self.families.append(fam)
        if self.impl is not None and self.families:
            bind_impl(self.families[0], self.impl, self.backend)
        self.units = [Unit(fam, p) for fam in self.families
                      for p in (list(request.properties) or properties_of(fam))]
        self.seed = request.seed
        if request.shard is not None:
            self.units = shard_units(self.units, request.shard)
            self.seed = shard_seed(request.seed, request.shard)
        self.resumed = resume.Resumed(request.resume, self.units, backend=self.backend.name,
                                      profile=self.request.profile)
        self.units = self.resumed.left
        self.corpus_mode = corpus_mode(self.profile_name, request.corpus,
                                       write=request.corpus_write)
        outage = Outage(spill=request.corpus_spill, required=request.corpus_required,
                        announce=self.emit)
        self.corpus = (None if self.corpus_mode == "off" else
                       open_corpus(request.corpus, writable=self.corpus_mode == "read-write",
                                   outage=outage))

    def _families(self) -> list[Family]:
        """The requested families; a Family object is used as given (and registered, so
        its repro command can find it by name)."""
        if not self.request.families:
            out, broken = registry.importable_families()
            self.broken.extend(broken.items())
            return out
        out = []
        for fam in self.request.families:
            if isinstance(fam, Family):
                registry.register_family(fam)
                out.append(fam)
                continue
            try:
                out.append(registry.get_family(fam))
            except registry.UnknownFamily as e:
                raise UsageError(str(e)) from None
        return out

    def _impl(self, n_families: int) -> tuple[Callable[..., Any] | None, str | None]:
        impl = self.request.impl
        if impl is None:
            return None, None
        if n_families != 1:
            raise UsageError("--impl replaces one family's kernel: name exactly one family")
        if isinstance(impl, str):
            return load_impl(impl), impl
        if not callable(impl):
            raise UsageError(f"impl {impl!r} is a {type(impl).__name__}, not callable")
        return impl, impl_spec_of(impl)

    @property
    def isolated(self) -> bool:
        """Whether units run in worker processes (``isolate``, a time limit, or ``jobs`` > 1)."""
        return bool(self.timeout) or self.request.isolate or self.request.jobs > 1

    def supervisor(self) -> Supervisor:
        """A worker process for this session's units
        (:mod:`kernel_harness.orchestration.supervisor`)."""
        return Supervisor(json.dumps(self.request.to_json_dict()), backend=self.backend.name,
                          timeout=self.timeout, impl_spec=self.impl_spec,
                          impl_label=self.impl_label)

    def header_lines(self) -> list[str]:
        """What runs: backend, profile, jax, families, the implementation, the adjustments."""
        return session_header.header_lines(self)

    def skip_results(self) -> list[UnitResult]:
        """One SKIP result per family the backend cannot run (never silent), and one ERROR
        per installed family that does not import."""
        out = [UnitResult(family=f.name, prop="-", backend=self.backend.name, verdict="SKIP",
                          record=results.skip_record(f.name, "-", self.backend.name, why),
                          line=verdict_line(f.name, "-", "SKIP", why))
               for f, why in self.skipped]
        for name, why in self.broken:
            record = results.skip_record(name, "-", self.backend.name, why) | {
                "verdict": "ERROR", "reason": None,
                "error": {"type": "FamilyDoesNotImport", "message": why}}
            out.append(UnitResult(family=name, prop="-", backend=self.backend.name,
                                  verdict="ERROR", record=record, text=why,
                                  line=verdict_line(name, "-", "ERROR", why)))
        return out

    def not_run(self, unit: Unit, why: str) -> UnitResult:
        """A unit left out on purpose (``--fail-fast``), listed with the reason."""
        reason = f"NOT RUN ({why})"
        return UnitResult(family=unit.family.name, prop=unit.prop, backend=self.backend.name,
                          verdict="NOT RUN",
                          record=results.skip_record(unit.family.name, unit.prop,
                                                     self.backend.name, reason),
                          line=verdict_line(unit.family.name, unit.prop, reason, ""))

    def run_unit(self, unit: Unit) -> UnitResult:
        """Runs one unit in this process (the worker runs this too)."""
        name, fam = unit.prop, unit.family
        diagnostics.use_user_waivers(self.user_waivers)
        impl_source.use_accepted(self.request.accepted_source, self.request.config_source)
        observer = Observer()
        progress = watch.Progress(fam.name, name, observer, self.request.progress_every)
        watched = watch.instrument(fam, name, heartbeat=self.request.heartbeat_file,
                                   progress=progress)
        try:
            prop = build_property(name, watched, backend=self.backend, impl=self.impl,
                                  impl_spec=self.impl_spec, observer=observer,
                                  draws_per_compile=self.draws_per_compile)
        except PropertyNotApplicable as e:
            why = f"not applicable: {e}"
            return UnitResult(family=fam.name, prop=name, backend=self.backend.name,
                              verdict="SKIP",
                              record=results.skip_record(fam.name, name, self.backend.name,
                                                         str(e)),
                              line=verdict_line(fam.name, name, "SKIP", why))
        replays = replay_unit(self.corpus, fam, name, self.backend, self.impl, self.impl_spec)
        if self.corpus is not None:
            for bad in self.corpus.quarantined_of(fam.name, name):
                self.emit(f"  {bad.line(self.corpus.location)}")
        for replay in replays:
            self.emit(f"  {replay.line()}")
        replayed = replayed_failure(replays, fam, name, self.backend)
        if replayed is not None:
            return with_corpus_notes(self.corpus, replayed)
        return with_corpus_notes(self.corpus, self._search(unit, watched, prop, observer))

    def _search(self, unit: Unit, watched: Family, prop: Callable[[], None],
                observer: Observer) -> UnitResult:
        """The unit's Hypothesis search, after its corpus replay passed."""
        name, fam = unit.prop, unit.family
        began = time.perf_counter()
        try:
            outcome = run_property(
                name, watched, prop, backend=self.backend, observer=observer,
                profile=self.profile, max_examples=self.request.max_examples,
                seed=self.seed, shrink_budget=self.shrink_budget,
                on_first_failure=self._first_failure, all_bugs=self.request.all_bugs,
                modes_first=self.modes_first, require_modes=self.request.require_modes)
        except interrupt.RunInterrupted as e:
            result, lines = interrupted_result(
                family=fam.name, prop=name, backend=self.backend, observer=observer,
                seconds=time.perf_counter() - began, name=e.name, corpus=self.corpus,
                impl_spec=self.impl_spec)
            for line in lines:
                self.emit(line)
            return result
        if outcome.error is not None:
            for entry in record_failure(self.corpus, fam, name, outcome.error, self.backend,
                                        self.impl_spec):
                self.emit(f"  corpus: {self.corpus.kept(entry)} ({entry.first_line[:80]})")
        label = outcome_text.verdict(outcome)
        verdict = label.split(" ")[0]
        record = results.outcome_record(outcome) | {"verdict": verdict}
        detail = outcome_text.detail(outcome)
        return UnitResult(family=fam.name, prop=name, backend=self.backend.name,
                          verdict=verdict, record=record, label=label,
                          text=outcome_text.failure_text(outcome),
                          line=verdict_line(fam.name, name, label if verdict == "PASS"
                                            else verdict, detail), outcome=outcome)

    def replay_stored(self, fam: Family) -> list[ReplayResult]:
        """Every stored failure of ``fam``, of all its properties, replayed once (the gate's
        corpus check); ``[]`` without a corpus."""
        return replay_unit(self.corpus, fam, None, self.backend, self.impl, self.impl_spec)

    def _first_failure(self, text: str) -> None:
        self.emit(f"\n--- first failing example (the full report follows shrinking) ---\n{text}")

    def run(self) -> SessionResult:
        """Runs every unit in order (``--fail-fast``: a family's units after its first
        failure are NOT RUN), printing each unit's report and verdict line as it ends."""
        for line in [*self.header_lines(), *filter(None, [self.resumed.line()])]:
            self.emit(line)
        jobs = max(1, min(self.request.jobs, len(self.units)))
        supervisors = [self.supervisor() for _ in range(jobs)] if self.isolated else []
        out: list[UnitResult] = []
        failed_first: dict[str, str] = {}
        start = time.monotonic()
        coverage = None
        with contextlib.ExitStack() as stack:
            if self.request.kernel_coverage:
                coverage = (kernel_coverage.KernelCoverage() if supervisors
                            else stack.enter_context(kernel_coverage.recording()))
            try:
                if len(supervisors) > 1:
                    out = parallel.run_units(self, supervisors, failed_first, start)
                else:
                    run_one = supervisors[0].run_unit if supervisors else self.run_unit
                    for unit in self.units:
                        if interrupt.requested():
                            break
                        out.append(self.run_or_skip(unit, run_one, failed_first))
                        self.finish_unit(unit, out[-1], failed_first, len(out), start)
            except interrupt.RunInterrupted:
                pass  # between units: what finished is kept
            finally:
                for supervisor in supervisors:
                    supervisor.close()
        if coverage is not None:
            for data in (d for supervisor in supervisors for d in supervisor.coverage):
                coverage.absorb(data)
        notes = ([n for supervisor in supervisors for n in supervisor.notes] if supervisors
                 else self.closing_notes())
        done = {(r.family, r.prop) for r in out}
        return SessionResult(session=self, results=self.resumed.results(out)
                             + self.skip_results(), notes=notes,
                             coverage=coverage, interrupted=interrupt.requested(),
                             not_started=[u.name for u in self.units
                                          if (u.family.name, u.prop) not in done])

    def run_or_skip(self, unit: Unit, run_one: Callable[[Unit], UnitResult],
                    failed_first: dict[str, str]) -> UnitResult:
        """The unit's result; NOT RUN under ``--fail-fast`` after its family's first failure."""
        first = failed_first.get(unit.family.name)
        if self.request.fail_fast and first is not None:
            return self.not_run(unit, f"--fail-fast: {first} failed")
        return run_one(unit)

    def finish_unit(self, unit: Unit, result: UnitResult, failed_first: dict[str, str],
                    done: int, start: float) -> None:
        """After a unit: the case a worker died on into the corpus, the failure's report,
        the verdict line with the run's position (``done`` units of all finished)."""
        if not result.verdict.startswith("NOT RUN"):
            for entry in record_supervised(self.corpus, unit.family, unit.prop, result,
                                           self.backend, self.impl_spec):
                self.emit(f"  corpus: {self.corpus.kept(entry)} (the case the worker died on)")
            if result.verdict in FAILED:
                failed_first.setdefault(unit.family.name, unit.prop)
                if result.text:
                    what = ("TIMED OUT" if result.label == "FAIL (timeout)" else "CRASHED"
                            if result.label.startswith("CRASH") else "FLAKY" if
                            result.verdict == "FLAKY" else "FAILED")
                    self.emit(f"\n=== {unit.family.name} / {unit.prop} {what} on "
                              f"{self.backend.name} ===\n{result.text}")
        self.emit(result.line + position_line(
            [u.family.name for u in self.units], done, time.monotonic() - start))

    def closing_notes(self) -> list[str]:
        """Lines for the end of the summary: tpu-interpret's diagnostics totals."""
        return [diagnostics.summary_line()] if self.backend.name == "tpu-interpret" else []


__all__ = ["CheckRequest", "CheckSession", "SessionResult", "Unit", "UnitResult", "position_line"]
