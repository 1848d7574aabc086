"""TPU interpret mode as a diagnostic: races and uninitialized reads, named and waivable.

Under ``--backend tpu-interpret`` kernels run with NaN-filled uninitialized
memory, race detection, a shuffled parallel grid order and two simulated
cores (:func:`kernel_harness.core.compat.tpu_interpret_params`). While a family's
adapter runs, :func:`kernel_harness.core.compat.recording_tpu_interpret` records
every simulated buffer access; this module turns that record into
:class:`Finding` s:

- ``race``: the interpreter's race detector flagged an access; the finding
  names the kernel source line, the buffer, the two conflicting accesses'
  cores and grid points.
- ``uninitialized-read``: a kernel read elements of a buffer that started
  uninitialized (scratch, output blocks) before anything wrote them. On a
  real TPU that is stale memory; here it is NaN and usually poisons outputs.

Known benign findings are waived in ``kernel_harness/run/waivers.json`` (one entry
per finding, each with its reason), and a user's in ``[[tool.kernel-harness.waivers]]``
of their ``pyproject.toml`` (a check session puts its request's in force:
:func:`use_user_waivers`); every report that counts waivers names each one's file, and
a waived finding its waiver and reason. Everything else fails the case with
:class:`KernelDiagnosticFailure` (a :class:`~kernel_harness.core.errors.KernelRaceDetected`
when a race is among them).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import pathlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kernel_harness.core import compat
from kernel_harness.core.errors import KernelRaceDetected
from kernel_harness.records.waiver_entries import checked_entry, jax_version_matches
from kernel_harness.run.findings import Finding, find_races, find_uninitialized_reads

#: The reviewed waiver file (a JSON list of entries, see :class:`Waiver`).
WAIVER_FILE = pathlib.Path(__file__).with_name("waivers.json")

@dataclasses.dataclass(frozen=True)
class Waiver:
    """A reviewed benign finding: matches findings of ``family`` (``*``: any) and
    ``kind`` whose ``kernel`` and ``buffer`` texts match the given regular
    expressions (``re.search``), on the jax versions ``jax`` names (all if empty):
    a finding re-derived on each jax version is scoped to the versions it was seen on."""

    family: str
    kind: str
    kernel: str
    buffer: str
    reason: str
    #: jax versions the finding was derived on, e.g. ``"<0.12"`` or ``">=0.12"``; empty: all.
    jax: str = ""
    #: A regular expression the offending access's source line (``Finding.line``,
    #: ``file:line (function)``) must match; empty: any line.
    line: str = ""
    #: The file that declares it (the package's ``waivers.json``, a user's
    #: ``pyproject.toml``) and its entry there, counted from 1: reports name both.
    source: str = WAIVER_FILE.name
    entry: int = 0

    @property
    def label(self) -> str:
        """``pyproject.toml entry 1``: where it is declared, for reports."""
        return f"{pathlib.Path(self.source).name} entry {self.entry}"

    def applies_to_jax(self, version: tuple[int, ...] | None = None) -> bool:
        """Whether this waiver holds on ``version`` (default: the installed jax)."""
        return jax_version_matches(self.jax, compat.JAX_VERSION if version is None else version)

    def matches(self, family: str, finding: Finding) -> bool:
        """Whether it waives ``finding`` of ``family`` on the installed jax."""
        return (
            self.applies_to_jax()
            and self.family in (family, "*")
            and self.kind == finding.kind
            and re.search(self.kernel, finding.kernel) is not None
            and re.search(self.buffer, finding.buffer) is not None
            and (not self.line or re.search(self.line, finding.line) is not None)
        )


def load_waivers(path: pathlib.Path | str | None = None) -> tuple[Waiver, ...]:
    """Reads the waiver file (``{"waivers": [...]}`` or a bare list); every entry needs
    family (or ``*``), kind, kernel and buffer regular expressions, and a non-empty reason
    (:func:`kernel_harness.records.waiver_entries.checked_entry`)."""
    path = pathlib.Path(path) if path is not None else WAIVER_FILE
    if not path.exists():
        return ()
    data = json.loads(path.read_text())
    entries = data.get("waivers", []) if isinstance(data, dict) else data
    waivers = []
    for i, entry in enumerate(entries, 1):
        try:
            fields = checked_entry(entry)
        except ValueError as e:
            raise ValueError(f"{path}: waiver #{i} {e}") from None
        waivers.append(Waiver(**fields, source=path.name, entry=i))
    return tuple(waivers)


def user_waivers(entries: Sequence[Mapping[str, str]], source: str) -> tuple[Waiver, ...]:
    """The waivers of a user's ``[[tool.kernel-harness.waivers]]`` (entries as
    :mod:`kernel_harness.records.config` checked them), declared in ``source``."""
    waivers = []
    for i, entry in enumerate(entries, 1):
        try:
            fields = checked_entry(dict(entry))
        except ValueError as e:
            raise ValueError(f"waiver entry {i} {e}") from None
        waivers.append(Waiver(**fields, source=source, entry=i))
    return tuple(waivers)


#: The user's waivers in force in this process (a check session sets its request's before
#: each unit: :func:`use_user_waivers`); the package's file applies always.
_IN_FORCE: dict[str, tuple[Waiver, ...]] = {"user": ()}


def use_user_waivers(waivers: Sequence[Waiver]) -> None:
    """Makes ``waivers`` (a user's, :func:`user_waivers`) apply beside the package's file
    to every run diagnosed from now on in this process (replacing those set before)."""
    _IN_FORCE["user"] = tuple(waivers)


def active_waivers() -> tuple[Waiver, ...]:
    """The package's reviewed waivers, then the user's in force (:func:`use_user_waivers`)."""
    return (*load_waivers(), *_IN_FORCE["user"])


def counts_by_source(waivers: Iterable[Waiver], shown: Iterable[str] = ()) -> str:
    """``waivers.json 5, pyproject.toml 1``: how many come from each file (the files named
    in ``shown`` first, even with none)."""
    counts = collections.Counter(dict.fromkeys(shown, 0))
    counts.update(pathlib.Path(w.source).name for w in waivers)
    return ", ".join(f"{name} {n}" for name, n in counts.items())


def _reason_start(waiver: Waiver, limit: int = 160) -> str:
    reason = " ".join(waiver.reason.split())  # the file's reasons run to paragraphs
    return reason if len(reason) <= limit else reason[:limit - 3] + "..."


def waived_text(finding: Finding, waiver: Waiver) -> str:
    """A waived finding, its waiver's source and (the start of) its reason."""
    return f"waived by {waiver.label}: {finding.describe()} (reason: {_reason_start(waiver)})"


@dataclasses.dataclass(frozen=True)
class Diagnosis:
    """Findings of one adapter run under tpu-interpret, split into waived and not."""

    kernels: int
    findings: tuple[Finding, ...]
    waived: tuple[tuple[Finding, Waiver], ...]
    races_flagged: int

    @property
    def failures(self) -> tuple[Finding, ...]:
        waived = {id(f) for f, _ in self.waived}
        return tuple(f for f in self.findings if id(f) not in waived)


class KernelDiagnosticFailure(AssertionError):
    """TPU interpret mode found unwaived races or uninitialized reads."""

    def __init__(self, family: str, diagnosis: Diagnosis):
        self.diagnosis = diagnosis
        lines = [
            f"{family}: TPU interpret mode found {len(diagnosis.failures)} problem(s) in "
            f"{diagnosis.kernels} interpreted kernel(s)"
            + (f" ({len(diagnosis.waived)} waived: "
               f"{counts_by_source(w for _, w in diagnosis.waived)})" if diagnosis.waived else "")
        ]
        lines += [f"  - {f.describe()}" for f in diagnosis.failures[:12]]
        if len(diagnosis.failures) > 12:
            lines.append(f"  ... and {len(diagnosis.failures) - 12} more")
        lines += [f"  {waived_text(f, w)}" for f, w in diagnosis.waived[:4]]
        if len(diagnosis.waived) > 4:
            lines.append(f"  ... and {len(diagnosis.waived) - 4} more waived")
        super().__init__("\n".join(lines))


class TpuInterpretCannotRun(RuntimeError):
    """TPU interpret mode cannot run this case at all (a known interpreter limitation).

    Not a kernel failure and never a pass: properties reject the example, count it
    under the event ``tpu-interpret cannot run: <reason>`` and the CLI prints the
    totals, so what was not tested is said explicitly.
    """

    def __init__(self, reason: str, detail: str):
        super().__init__(f"TPU interpret mode cannot run this case: {reason} ({detail})")
        self.reason = reason


#: (pattern in the error text, reason): interpreter limitations seen in jax 0.10.
KNOWN_LIMITATIONS: tuple[tuple[str, str], ...] = (
    (
        r"safe_zip\(\) argument 1 has length \d+ but argument 0 has length \d+",
        "a pallas_call batched by jax.vmap: the batched grid has an axis its "
        "dimension_semantics do not list, which the interpreter's grid shuffling rejects",
    ),
)


def _limitation(error: BaseException) -> TpuInterpretCannotRun | None:
    text = str(error)
    for pattern, reason in KNOWN_LIMITATIONS:
        if re.search(pattern, text):
            first = text.strip().splitlines()[0][:160] if text.strip() else type(error).__name__
            return TpuInterpretCannotRun(reason, first)
    return None


class KernelRaceFailure(KernelDiagnosticFailure, KernelRaceDetected):
    """Unwaived findings including at least one data race."""


class UninitializedReadFailure(KernelDiagnosticFailure):
    """Unwaived uninitialized reads (and no race)."""


def diagnose(
    log: compat.TpuInterpretLog, family: str, waivers: Sequence[Waiver] | None = None
) -> Diagnosis:
    """The findings of one recorded run, matched against ``waivers`` (default: the
    package's file and the user's waivers in force, :func:`active_waivers`)."""
    waivers = active_waivers() if waivers is None else waivers
    serials = sorted({a.kernel_index for a in log.accesses} | log.races_flagged)
    relative = {s: i for i, s in enumerate(serials)}
    findings = find_races(log, relative) + find_uninitialized_reads(log, relative)
    unattributed = {relative[s] for s in log.races_flagged} - {
        f.kernel_index for f in findings if f.kind == "race"
    }
    for index in sorted(unattributed):
        findings.append(
            Finding(kind="race", kernel="?", kernel_index=index, buffer="?", line="?",
                    detail="flagged by the interpreter's race detector (no access attributed)",
                    grid_points=())
        )
    waived = []
    for f in findings:
        w = next((w for w in waivers if w.matches(family, f)), None)
        if w is not None:
            waived.append((f, w))
    return Diagnosis(
        kernels=log.kernels, findings=tuple(findings), waived=tuple(waived),
        races_flagged=len(log.races_flagged),
    )


#: Counts across a process: how many runs were diagnosed, findings, waived ones.
TOTALS: collections.Counter = collections.Counter()
#: Runs TPU interpret mode could not do, by reason.
NOT_RUN: collections.Counter = collections.Counter()
#: Findings waived, by the waiver that waived them.
WAIVED: collections.Counter = collections.Counter()


def diagnosed_run(family: str, run: Callable[[], Any], *, waivers: Sequence[Waiver] | None = None
                  ) -> tuple[Any, Diagnosis]:
    """Calls ``run()`` (an adapter call on tpu-interpret) while recording, resetting the
    simulator state before and after (also after a failure, which shrinking reruns);
    raises :class:`KernelDiagnosticFailure` on unwaived findings."""
    compat.reset_tpu_interpret_state()
    try:
        with compat.recording_tpu_interpret() as log:
            result = run()
    except Exception as e:
        cannot = _limitation(e)
        if cannot is None:
            raise
        TOTALS["cannot run"] += 1
        NOT_RUN[cannot.reason] += 1
        raise cannot from e
    finally:
        compat.reset_tpu_interpret_state()
    if log.kernels and not log.accesses:
        raise compat.InterpreterLayoutError(
            f"{log.kernels} kernel(s) interpreted but the race detector recorded no buffer "
            "access: race detection did not run")
    diagnosis = diagnose(log, family, waivers)
    TOTALS["runs"] += 1
    TOTALS["kernels"] += diagnosis.kernels
    TOTALS["findings"] += len(diagnosis.findings)
    TOTALS["waived"] += len(diagnosis.waived)
    WAIVED.update(w for _, w in diagnosis.waived)
    if any(f.kind == "race" for f in diagnosis.failures):
        raise KernelRaceFailure(family, diagnosis)
    if diagnosis.failures:
        raise UninitializedReadFailure(family, diagnosis)
    return result, diagnosis


def jax_text() -> str:
    """The installed jax version, for reports."""
    import jax

    return jax.__version__


def summary_line() -> str:
    """One line for a CLI summary: interpreted runs, kernels, findings, waivers (how many
    from each file: the package's ``waivers.json``, the user's ``pyproject.toml``), then
    a line per waiver that waived a finding, with its source and reason."""
    t = TOTALS
    holding = [w for w in active_waivers() if w.applies_to_jax()]
    line = (
        f"tpu-interpret diagnostics: {t['runs']} adapter run(s), {t['kernels']} interpreted "
        f"kernel(s), {t['findings']} finding(s), {t['waived']} waived "
        f"(waivers: {counts_by_source(holding, [WAIVER_FILE.name])}; entries for jax "
        f"{jax_text()})"
    )
    for waiver, n in WAIVED.items():
        line += (f"\n  waived {n} finding(s) by {waiver.label} ({waiver.family}, "
                 f"{waiver.kind}): {_reason_start(waiver)}")
    for reason, n in NOT_RUN.items():
        line += (f"\n  NOT RUN (neither pass nor fail): {n} run(s) TPU interpret mode "
                 f"cannot do: {reason}")
    return line


def note_cannot_run(error: TpuInterpretCannotRun, observer: Any = None) -> None:
    """Counts an example TPU interpret mode could not run and rejects it (Hypothesis
    draws another): it is reported (an event, and ``observer.rejected``), never passed
    nor failed."""
    import hypothesis

    label = f"tpu-interpret cannot run: {error.reason[:60]}"
    hypothesis.event(label)
    if observer is not None:
        observer.events[label] += 1
        observer.rejected += 1
    hypothesis.reject()
