"""Kernel-branch coverage: which paths inside interpreted Pallas kernels the cases ran.

Events say what a drawn case *describes*; this records what the kernel *executed*. Inside
:func:`recording`, every interpreted ``pallas_call`` is lowered with probes
(:mod:`kernel_harness.core.compat.kernel_probes`): each ``cond`` (``pl.when``) reports its
branch, each scalar comparison True/False, each ``select_n`` (``jnp.where``) all-false /
all-true / mixed, each traced-bound loop its trip count (0, 1, 2+), per source line of the
kernel. :class:`KernelCoverage` aggregates the reports per site; :meth:`KernelCoverage.table`
lists MISSING outcomes first (those a family does not expect to miss), then the rest.

Turning coverage on or off never runs a program lowered the other way: entering and leaving
:func:`recording` drop jax's in-memory caches (traces, lowerings, executables), and the
persistent compile cache is keyed by the lowered program, which the probes change (programs
with host callbacks are never written to it). ``tests/run/test_kernel_coverage.py`` checks both.

Expected misses are data: ``{pattern: reason}``, each pattern an ``fnmatch`` glob over an
outcome's label, ``KERNEL FILE:LINE DETAIL `SOURCE` -> OUTCOME``, e.g.
``*_kernel splash_attention_kernel.py:* select_n `*jnp.where(mask*` -> all-false``. Matching on
the source text keeps a pattern valid across jax versions whose line numbers differ.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import linecache
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import hypothesis

from kernel_harness.core.compat.kernel_probes import ProbeSite, clear_compiled, kernel_probes


@dataclasses.dataclass
class SiteCoverage:
    """One kernel source site and the outcomes seen there (count per outcome; 0 = never)."""

    kernel: str
    file: str
    line: int
    function: str
    kind: str
    detail: str
    source: str
    counts: dict[str, int]

    @property
    def where(self) -> str:
        """``file.py:LINE`` (the file's base name)."""
        return f"{self.file.rsplit('/', 1)[-1]}:{self.line}"

    def label(self, outcome: str) -> str:
        """The text expected-missing patterns match: ``KERNEL FILE:LINE DETAIL `SRC` -> OUT``."""
        return f"{self.kernel} {self.where} {self.detail} `{self.source}` -> {outcome}"


def _key(site: ProbeSite) -> tuple[str, str, int, str]:
    return site.kernel, site.file, site.line, site.detail


class KernelCoverage:
    """Outcomes seen per kernel source site, filled while :func:`recording` is active.

    ``sites`` maps ``(kernel, file, line, detail)`` to a :class:`SiteCoverage`; several
    lowerings of one kernel (vmapped, with and without residuals) add up on one site.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.sites: dict[tuple[str, str, int, str], SiteCoverage] = {}
        self._by_id: list[tuple[SiteCoverage, tuple[str, ...]]] = []
        self.uninstrumented_kernels: dict[str, str] = {}
        self.kernels: set[str] = set()

    # The ProbeSink protocol (called by the compat layer).
    def site(self, site: ProbeSite) -> int:
        """Registers a probed site at lowering time; returns the probe's id."""
        with self._lock:
            entry = self.sites.get(_key(site))
            if entry is None:
                source = linecache.getline(site.file, site.line).strip()
                entry = SiteCoverage(kernel=site.kernel, file=site.file, line=site.line,
                                     function=site.function, kind=site.kind,
                                     detail=site.detail, source=source, counts={})
                self.sites[_key(site)] = entry
            for outcome in site.outcomes:
                entry.counts.setdefault(outcome, 0)
            self._by_id.append((entry, site.outcomes))
            return len(self._by_id) - 1

    def hit(self, site_id: int, code: int) -> None:
        """Counts one run-time report of probe ``site_id`` (``code`` indexes its outcomes)."""
        with self._lock:
            entry, outcomes = self._by_id[site_id]
            entry.counts[outcomes[code]] += 1

    def instrumented(self, kernel: str) -> None:
        """Notes a kernel lowered with probes (one without branches has no site)."""
        with self._lock:
            self.kernels.add(kernel)

    def uninstrumented(self, kernel: str, why: str) -> None:
        """Notes a kernel that ran without probes (a compiled kernel)."""
        with self._lock:
            self.uninstrumented_kernels[kernel] = why

    def absorb(self, data: Mapping[str, Any]) -> None:
        """Adds another recording's :meth:`to_json` (a worker process's) to this one."""
        with self._lock:
            for d in data["sites"]:
                key = (d["kernel"], d["file"], d["line"], d["detail"])
                entry = self.sites.get(key)
                if entry is None:
                    entry = self.sites[key] = SiteCoverage(
                        kernel=d["kernel"], file=d["file"], line=d["line"],
                        function=d["function"], kind=d["kind"], detail=d["detail"],
                        source=d["source"], counts={})
                for outcome, n in d["counts"].items():
                    entry.counts[outcome] = entry.counts.get(outcome, 0) + n
            self.kernels.update(data["kernels"])
            self.uninstrumented_kernels.update(data["uninstrumented_kernels"])

    # Queries.
    def seen(self) -> dict[tuple[tuple[str, str, int, str], str], int]:
        """Every ``(site key, outcome)`` seen so far, with its count: a snapshot that
        :meth:`reached_since` compares against."""
        with self._lock:
            return {(k, o): n for k, s in self.sites.items() for o, n in s.counts.items()
                    if n}

    def reached_since(self, before: Mapping[tuple[tuple[str, str, int, str], str], int]
                      ) -> tuple[int, int]:
        """``(reached, first)`` since the snapshot ``before`` (:meth:`seen`): the outcomes
        whose count grew, and of them those never seen before it."""
        now = self.seen()
        grown = [k for k, n in now.items() if n > before.get(k, 0)]
        return len(grown), sum(k not in before for k in grown)

    def total_hits(self) -> int:
        """All probe reports so far."""
        with self._lock:
            return sum(sum(s.counts.values()) for s in self.sites.values())

    def outcomes(self, expected_missing: Mapping[str, str] | None = None
                 ) -> list[tuple[SiteCoverage, str, int, str | None]]:
        """Every ``(site, outcome, count, reason)``; ``reason`` is the first expected-missing
        pattern's reason matching the outcome's label, else None."""
        patterns = list((expected_missing or {}).items())
        out = []
        for s in sorted(self.sites.values(), key=lambda s: (s.kernel, s.file, s.line, s.detail)):
            for outcome, count in s.counts.items():
                label = s.label(outcome)
                reason = next((r for p, r in patterns if fnmatch.fnmatchcase(label, p)), None)
                out.append((s, outcome, count, reason))
        return out

    def missing(self, expected_missing: Mapping[str, str] | None = None) -> list[str]:
        """Labels of the outcomes never seen that no expected-missing pattern lists."""
        return [s.label(o) for s, o, n, why in self.outcomes(expected_missing)
                if n == 0 and why is None]

    def unused_patterns(self, expected_missing: Mapping[str, str]) -> list[str]:
        """Expected-missing patterns that match no outcome of this recording."""
        labels = [s.label(o) for s, o, _, _ in self.outcomes()]
        return [p for p in expected_missing if not any(fnmatch.fnmatchcase(x, p) for x in labels)]

    def table(self, expected_missing: Mapping[str, str] | None = None) -> str:
        """The coverage table: MISSING outcomes (never seen, not expected), then expected
        misses with their reasons (and listed ones that were seen after all), then every
        site with its outcome counts."""
        rows = self.outcomes(expected_missing)
        kernels = sorted(self.kernels | {s.kernel for s in self.sites.values()})
        bare = sorted(set(kernels) - {s.kernel for s in self.sites.values()})
        lines = [f"kernel coverage: {len(kernels)} kernel(s) ({', '.join(kernels) or '-'}), "
                 f"{len(self.sites)} sites, {len(rows)} outcomes, "
                 f"{sum(n > 0 for _, _, n, _ in rows)} seen"]
        if bare:
            lines.append(f"  instrumented, no branch to probe: {', '.join(bare)}")
        for kernel, why in sorted(self.uninstrumented_kernels.items()):
            lines.append(f"  NOT INSTRUMENTED {kernel}: {why}")
        missing = [(s, o) for s, o, n, why in rows if n == 0 and why is None]
        lines.append(f"MISSING ({len(missing)}): never seen, not listed as expected")
        lines += [f"  MISSING {_site_text(s)} -> {o}   (seen: {_counts(s)})" for s, o in missing]
        expected = [(s, o, n, why) for s, o, n, why in rows if why is not None]
        if expected:
            lines.append(f"expected missing ({len(expected)}), as the family lists them:")
        for s, o, n, why in expected:
            note = f"SEEN {n}x although listed" if n else "missing"
            lines.append(f"  {note}: {_site_text(s)} -> {o}: {why}")
        for pattern in self.unused_patterns(expected_missing or {}):
            lines.append(f"  (expected-missing pattern matched nothing: {pattern!r})")
        lines.append("all sites (outcome=count):")
        for s in sorted(self.sites.values(), key=lambda s: (s.kernel, s.file, s.line, s.detail)):
            lines.append(f"  {_site_text(s)}: {_counts(s)}")
        return "\n".join(lines)

    def to_json(self, expected_missing: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Machine-readable coverage: every site with its counts, and the missing labels."""
        return {
            "sites": [{"kernel": s.kernel, "file": s.file, "line": s.line,
                       "function": s.function, "kind": s.kind, "detail": s.detail,
                       "source": s.source, "counts": dict(s.counts)}
                      for s in sorted(self.sites.values(),
                                      key=lambda s: (s.kernel, s.file, s.line, s.detail))],
            "missing": self.missing(expected_missing),
            "expected_missing": [{"label": s.label(o), "count": n, "reason": why}
                                 for s, o, n, why in self.outcomes(expected_missing)
                                 if why is not None],
            "kernels": sorted(self.kernels),
            "uninstrumented_kernels": dict(self.uninstrumented_kernels),
        }


def _site_text(s: SiteCoverage) -> str:
    return f"{s.kernel} {s.where} {s.detail} `{s.source}`"


def _counts(s: SiteCoverage) -> str:
    return " ".join(f"{o}={n}" for o, n in s.counts.items())


@contextlib.contextmanager
def recording() -> Iterator[KernelCoverage]:
    """Records kernel-branch coverage of the interpreted Pallas kernels run inside.

    jax's in-memory caches are cleared on entry and exit, so programs lowered without probes
    are re-lowered with them here, and none lowered here is reused afterwards.
    """
    coverage = KernelCoverage()
    clear_compiled()
    try:
        with kernel_probes(coverage):
            _RECORDING.append(coverage)
            try:
                yield coverage
            finally:
                _RECORDING.clear()
    finally:
        clear_compiled()


#: The recording in progress (at most one: :func:`kernel_probes` is not reentrant).
_RECORDING: list[KernelCoverage] = []


def current() -> KernelCoverage | None:
    """The kernel coverage being recorded in this process, or None (coverage off)."""
    return _RECORDING[0] if _RECORDING else None


#: The labels of the ``hypothesis.target`` observations coverage steering makes.
REACHED_LABEL = "kernel branch outcomes reached"
FIRST_LABEL = "kernel branch outcomes reached first"


Snapshot = tuple[KernelCoverage, dict[tuple[tuple[str, str, int, str], str], int]]


def steering_snapshot() -> Snapshot | None:
    """Where an example starts, for :func:`steer` (None with coverage off). Not a context
    manager on purpose: the example's failure must leave the property with its own traceback
    (Hypothesis tells bugs apart by where they were raised)."""
    coverage = current()
    return None if coverage is None else (coverage, coverage.seen())


def steer(snapshot: Snapshot | None) -> None:
    """Steers the search towards kernel branches (issue 40): with coverage on, tells
    Hypothesis how many branch outcomes the example since ``snapshot`` reached and how many
    it reached first (``hypothesis.target``), so examples that open new paths are mutated
    further. Call once per example, after it ran to a verdict; None does nothing."""
    if snapshot is None:
        return
    coverage, before = snapshot
    reached, first = coverage.reached_since(before)
    hypothesis.target(float(reached), label=REACHED_LABEL)
    hypothesis.target(float(first), label=FIRST_LABEL)




#: Backends whose kernels are interpreted, hence can carry probes.
INTERPRETED_BACKENDS = frozenset({"interpret", "tpu-interpret"})


def check_backend(backend: str) -> None:
    """``--kernel-coverage`` needs kernels that are interpreted (a compiled kernel carries no
    probes): any other backend is a :class:`~kernel_harness.core.errors.UsageError`."""
    from kernel_harness.core.errors import UsageError

    if backend not in INTERPRETED_BACKENDS:
        raise UsageError(f"--kernel-coverage needs an interpreted backend "
                         f"({', '.join(sorted(INTERPRETED_BACKENDS))}), not {backend!r}")


def expected_missing_of(families: Iterable[Any]) -> dict[str, str]:
    """The expected misses of every family of a run (``Family.coverage_expected_missing``)."""
    expected: dict[str, str] = {}
    for fam in families:
        expected.update(getattr(fam, "coverage_expected_missing", {}))
    return expected


def run_json(coverage: KernelCoverage, families: Iterable[Any]) -> dict[str, Any]:
    """The ``kernel_coverage`` section of ``check --json``: the run's recording judged
    against its families' expected misses."""
    families = list(families)
    return {"families": [f.name for f in families],
            **coverage.to_json(expected_missing_of(families))}


def family_tables(coverage: KernelCoverage | None, families: Iterable[Any]) -> list[str]:
    """The coverage table of a run, judged against the expected misses of every family in
    it (``Family.coverage_expected_missing``); [] when there is no coverage."""
    if coverage is None:
        return []
    families = list(families)
    names = ", ".join(f.name for f in families)
    return [f"\nkernel-branch coverage of {names}:",
            coverage.table(expected_missing_of(families))]


__all__ = ["INTERPRETED_BACKENDS", "KernelCoverage", "SiteCoverage", "check_backend",
           "expected_missing_of", "family_tables", "recording", "run_json"]
