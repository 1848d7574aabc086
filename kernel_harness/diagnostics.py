"""TPU interpret mode as a diagnostic: races and uninitialized reads, named and waivable.

Under ``--backend tpu-interpret`` kernels run with NaN-filled uninitialized
memory, race detection, a shuffled parallel grid order and two simulated
cores (:func:`kernel_harness.compat.tpu_interpret_params`). While a family's
adapter runs, :func:`kernel_harness.compat.recording_tpu_interpret` records
every simulated buffer access; this module turns that record into
:class:`Finding` s:

- ``race``: the interpreter's race detector flagged an access; the finding
  names the kernel source line, the buffer, the two conflicting accesses'
  cores and grid points.
- ``uninitialized-read``: a kernel read elements of a buffer that started
  uninitialized (scratch, output blocks) before anything wrote them. On a
  real TPU that is stale memory; here it is NaN and usually poisons outputs.

Known benign findings are waived in ``kernel_harness/waivers.json`` (one entry
per finding, each with its reason); everything else fails the case with
:class:`KernelDiagnosticFailure` (a :class:`~kernel_harness.runner.KernelRaceDetected`
when a race is among them).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import pathlib
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kernel_harness import compat
from kernel_harness.runner import KernelRaceDetected

#: The reviewed waiver file (a JSON list of entries, see :class:`Waiver`).
WAIVER_FILE = pathlib.Path(__file__).with_name("waivers.json")

FINDING_KINDS: tuple[str, ...] = ("race", "uninitialized-read")


@dataclasses.dataclass(frozen=True)
class Finding:
    """One diagnostic finding of one interpreted kernel.

    Attributes:
      kind: ``race`` or ``uninitialized-read``.
      kernel: the kernel body function (``function (file)``).
      kernel_index: which interpreted ``pallas_call`` of the run (0 = first).
      buffer: which buffer, its shape and dtype: ``[input 1] ...``/``[output 0] ...``
        for the kernel's HBM operands in order, ``[vmem#104 core 0] ...`` for a
        core's scratch or block buffers.
      line: the source line of the offending access (``file:line (function)``),
        or ``pallas_call block copy`` for the interpreter's own block copies.
      detail: ranges, cores and grid points involved.
      grid_points: the grid points of the offending accesses.
    """

    kind: str
    kernel: str
    kernel_index: int
    buffer: str
    line: str
    detail: str
    grid_points: tuple[tuple[int, ...], ...]

    def describe(self) -> str:
        return (
            f"{self.kind} in kernel #{self.kernel_index} {self.kernel or '?'}, buffer "
            f"{self.buffer}, at {self.line}: {self.detail}"
        )


@dataclasses.dataclass(frozen=True)
class Waiver:
    """A reviewed benign finding: matches findings of ``family`` (``*``: any) and
    ``kind`` whose ``kernel`` and ``buffer`` texts match the given regular
    expressions (``re.search``)."""

    family: str
    kind: str
    kernel: str
    buffer: str
    reason: str

    def matches(self, family: str, finding: Finding) -> bool:
        return (
            self.family in (family, "*")
            and self.kind == finding.kind
            and re.search(self.kernel, finding.kernel) is not None
            and re.search(self.buffer, finding.buffer) is not None
        )


def load_waivers(path: pathlib.Path | str | None = None) -> tuple[Waiver, ...]:
    """Reads the waiver file (``{"waivers": [...]}`` or a bare list); every entry needs
    family (or ``*``), kind, kernel and buffer regular expressions, and a non-empty reason."""
    path = pathlib.Path(path) if path is not None else WAIVER_FILE
    if not path.exists():
        return ()
    data = json.loads(path.read_text())
    entries = data.get("waivers", []) if isinstance(data, dict) else data
    waivers = []
    for i, entry in enumerate(entries):
        missing = {"family", "kind", "kernel", "buffer", "reason"} - set(entry)
        if missing:
            raise ValueError(f"{path}: waiver #{i} lacks {sorted(missing)}")
        if entry["kind"] not in FINDING_KINDS:
            raise ValueError(f"{path}: waiver #{i} has unknown kind {entry['kind']!r}")
        if not str(entry["reason"]).strip():
            raise ValueError(f"{path}: waiver #{i} needs a reason")
        for field in ("kernel", "buffer"):
            try:
                re.compile(str(entry[field]))
            except re.error as e:
                raise ValueError(f"{path}: waiver #{i} {field}: bad pattern: {e}") from None
        waivers.append(Waiver(**{k: str(entry[k]) for k in Waiver.__dataclass_fields__}))
    return tuple(waivers)


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
            + (f" ({len(diagnosis.waived)} waived)" if diagnosis.waived else "")
        ]
        lines += [f"  - {f.describe()}" for f in diagnosis.failures[:12]]
        if len(diagnosis.failures) > 12:
            lines.append(f"  ... and {len(diagnosis.failures) - 12} more")
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


# --- analysis of the access log -----------------------------------------------------------------


def _region(where: Sequence[Any], shape: tuple[int, ...]) -> tuple[slice, ...]:
    out = []
    for dim, size in enumerate(shape):
        r = where[dim] if dim < len(where) else slice(None)
        if isinstance(r, slice):
            start = 0 if r.start is None else int(r.start)
            stop = size if r.stop is None else int(r.stop)
            out.append(slice(start, stop, None if r.step in (None, 1) else int(r.step)))
        else:
            out.append(slice(int(r), int(r) + 1))
    return tuple(out)


def _overlap(a: Sequence[Any], b: Sequence[Any]) -> bool:
    for ra, rb in zip(a, b, strict=False):
        sa = ra if isinstance(ra, slice) else slice(int(ra), int(ra) + 1)
        sb = rb if isinstance(rb, slice) else slice(int(rb), int(rb) + 1)
        if sa.start is None or sb.start is None or sa.stop is None or sb.stop is None:
            continue
        if not (sa.start < sb.stop and sb.start < sa.stop):
            return False
    return True


def _happens_before(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return False
    return bool((a <= b).all() and (a < b).any())


def _fmt_where(where: Sequence[Any]) -> str:
    parts = []
    for r in where:
        if isinstance(r, slice):
            start = "" if r.start is None else r.start
            stop = "" if r.stop is None else r.stop
            parts.append(f"{start}:{stop}")
        else:
            parts.append(str(r))
    return "[" + ", ".join(parts) + "]" if parts else "[all]"


def buffer_names(log: compat.TpuInterpretLog) -> dict[tuple[int, tuple[Any, ...]], str]:
    """Readable names of every allocated buffer: HBM operands numbered per kernel in
    allocation order (``[input i]`` hold data, ``[output j]`` start uninitialized)."""
    names = {}
    counters: collections.Counter = collections.Counter()
    for key, alloc in log.allocations.items():
        space, buffer_id, _device, core = (tuple(alloc.buffer) + (None,) * 4)[:4]
        if str(space) == "hbm":
            role = "output" if alloc.uninitialized else "input"
            label = f"[{role} {counters[(alloc.kernel_index, role)]}]"
            counters[(alloc.kernel_index, role)] += 1
        else:
            label = f"[{space}#{buffer_id} core {core}] scratch or block buffer,"
        names[key] = f"{label} {alloc.shape} {alloc.dtype}"
    return names


def _kernels(log: compat.TpuInterpretLog) -> dict[int, str]:
    counts: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    for a in log.accesses:
        if a.kernel:
            counts[a.kernel_index][a.kernel] += 1
    return {k: c.most_common(1)[0][0] for k, c in counts.items()}


def _line(access: compat.BufferAccess) -> str:
    return "pallas_call block copy" if access.frame == "pallas_call" else access.frame


def _concurrent(a: compat.BufferAccess, b: compat.BufferAccess) -> bool:
    return not (_happens_before(a.clock, b.clock) or _happens_before(b.clock, a.clock))


def find_races(log: compat.TpuInterpretLog, relative: dict[int, int]) -> list[Finding]:
    """Every pair of accesses of one buffer by different cores, at least one a write,
    overlapping and unordered by the simulator's vector clocks (the interpreter's own
    rule; it flags only the first race of a kernel, this lists them all), grouped by
    buffer and the two source lines."""
    by_buffer: dict[tuple[int, tuple[Any, ...]], list[compat.BufferAccess]] = (
        collections.defaultdict(list)
    )
    for a in log.accesses:
        if a.clock is not None:
            by_buffer[(a.kernel_index, a.buffer)].append(a)
    names, kernels = buffer_names(log), _kernels(log)
    groups: dict[tuple[Any, ...], list[tuple[Any, Any]]] = collections.defaultdict(list)
    for key, accesses in by_buffer.items():
        if len({(a.device, a.core) for a in accesses}) < 2:
            continue
        for i, a in enumerate(accesses):
            for b in accesses[:i]:
                if ((a.kind == "write" or b.kind == "write") and (a.device, a.core) != (
                        b.device, b.core) and _overlap(a.where, b.where) and _concurrent(a, b)):
                    groups[(key, _line(b), b.kind, _line(a), a.kind)].append((b, a))
    findings = []
    for (key, _, _, _, _), pairs in groups.items():
        b, a = pairs[0]
        points = tuple(dict.fromkeys(p for pair in pairs for x in pair
                                     if (p := x.grid_point) is not None))
        findings.append(
            Finding(
                kind="race", kernel=kernels.get(key[0], ""), kernel_index=relative[key[0]],
                buffer=names.get(key, str(key[1])), line=_line(a),
                detail=(
                    f"{len(pairs)} conflicting pair(s); first: {a.kind} of {_fmt_where(a.where)} "
                    f"by core {a.core} at grid point {a.grid_point} vs {b.kind} of "
                    f"{_fmt_where(b.where)} by core {b.core} at grid point {b.grid_point} "
                    f"({_line(b)})"
                ),
                grid_points=points,
            )
        )
    return findings


def find_uninitialized_reads(
    log: compat.TpuInterpretLog, relative: dict[int, int]
) -> list[Finding]:
    """Reads of elements of an uninitialized-at-allocation buffer that nothing wrote first.

    Accesses of one buffer are taken in the order they were recorded, which
    is program order for a core's own VMEM/SMEM buffers and, for HBM outputs,
    the order across the interpreter's barriers.
    """
    written: dict[tuple[int, tuple[Any, ...]], np.ndarray] = {}
    hits: dict[tuple[int, tuple[Any, ...], str], list[Any]] = collections.defaultdict(list)
    for a in log.accesses:
        key = (a.kernel_index, a.buffer)
        alloc = log.allocations.get(key)
        if alloc is None or not alloc.uninitialized or not alloc.shape:
            continue
        mask = written.get(key)
        if mask is None:
            mask = written[key] = np.zeros(alloc.shape, bool)
        region = _region(a.where, alloc.shape)
        if a.kind == "write":
            mask[region] = True
            continue
        missing = int(np.count_nonzero(~mask[region]))
        if missing:
            hits[(a.kernel_index, a.buffer, a.frame)].append((a, missing))
    findings = []
    names, kernels = buffer_names(log), _kernels(log)
    for (index, buffer, _frame), found in hits.items():
        first, missing = found[0]
        points = tuple(dict.fromkeys(a.grid_point for a, _ in found if a.grid_point is not None))
        shown = ", ".join(str(p) for p in points[:6]) + (" ..." if len(points) > 6 else "")
        findings.append(
            Finding(
                kind="uninitialized-read", kernel=kernels.get(index, ""),
                kernel_index=relative[index], buffer=names.get((index, buffer), str(buffer)),
                line=_line(first),
                detail=(
                    f"{len(found)} read(s) of never-written elements, first "
                    f"{_fmt_where(first.where)} by core {first.core} ({missing} elements "
                    f"uninitialized) at grid point(s) {shown or '-'}"
                ),
                grid_points=points,
            )
        )
    return findings


def diagnose(
    log: compat.TpuInterpretLog, family: str, waivers: Sequence[Waiver] | None = None
) -> Diagnosis:
    """The findings of one recorded run, matched against ``waivers`` (default: the file)."""
    waivers = load_waivers() if waivers is None else waivers
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
    diagnosis = diagnose(log, family, waivers)
    TOTALS["runs"] += 1
    TOTALS["kernels"] += diagnosis.kernels
    TOTALS["findings"] += len(diagnosis.findings)
    TOTALS["waived"] += len(diagnosis.waived)
    if any(f.kind == "race" for f in diagnosis.failures):
        raise KernelRaceFailure(family, diagnosis)
    if diagnosis.failures:
        raise UninitializedReadFailure(family, diagnosis)
    return result, diagnosis


def summary_line() -> str:
    """One line for a CLI summary: interpreted runs, kernels, findings, waivers."""
    t = TOTALS
    line = (
        f"tpu-interpret diagnostics: {t['runs']} adapter run(s), {t['kernels']} interpreted "
        f"kernel(s), {t['findings']} finding(s), {t['waived']} waived "
        f"(waivers: {WAIVER_FILE.name}, {len(load_waivers())} entries)"
    )
    for reason, n in NOT_RUN.items():
        line += (f"\n  NOT RUN (neither pass nor fail): {n} run(s) TPU interpret mode "
                 f"cannot do: {reason}")
    return line


def note_cannot_run(error: TpuInterpretCannotRun, observer: Any = None) -> None:
    """Counts an example TPU interpret mode could not run and rejects it (Hypothesis
    draws another): it is reported, never passed."""
    import hypothesis

    label = f"tpu-interpret cannot run: {error.reason[:60]}"
    hypothesis.event(label)
    if observer is not None:
        observer.events[label] += 1
    hypothesis.reject()
