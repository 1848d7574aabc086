"""Replaying stored failures: each entry's case (and draws) run once, exactly, before a
unit's Hypothesis search, whatever ``--max-examples`` and ``--seed`` say.

``matches-reference`` entries go through
:func:`kernel_harness.run.runner.check_case`, metamorphic ones through
:func:`kernel_harness.checks.metamorphic.repro.replay`: the same paths as
``kernel-harness repro``, so a failing replay prints the usual report and repro command.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal

from kernel_harness.checks.metamorphic import MetamorphicFailure
from kernel_harness.checks.metamorphic.machinery import applicable
from kernel_harness.checks.metamorphic.op_relations import spec_for
from kernel_harness.checks.metamorphic.replay import Replayer
from kernel_harness.checks.metamorphic.repro import replay
from kernel_harness.core.backends import Backend
from kernel_harness.core.errors import PropertyNotApplicable
from kernel_harness.orchestration.corpus.entry import CorpusEntry
from kernel_harness.records.family import Family
from kernel_harness.run.crash import Crash
from kernel_harness.run.diagnostics import TpuInterpretCannotRun
from kernel_harness.run.report import PREFIX, case_repro_command, failure_report
from kernel_harness.run.runner import check_case, impl_name

#: ``PASS``: the stored case passes now (it stays, as a regression case). ``FAIL``: it
#: still fails. ``CRASH``: the implementation raised. ``ERROR``: the entry cannot be
#: replayed (its case no longer loads, its property is gone). ``SKIP``: this backend
#: cannot run it (tpu-interpret's known limits), said, never a pass.
Status = Literal["PASS", "FAIL", "CRASH", "ERROR", "SKIP"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReplayResult:
    """The outcome of replaying one entry."""

    entry: CorpusEntry
    status: Status
    #: The failure's report (its first line first, then detail and the repro command),
    #: or why it was skipped; empty for a pass.
    report: str
    seconds: float

    @property
    def failed(self) -> bool:
        """Whether this replay makes its unit fail."""
        return self.status in ("FAIL", "CRASH", "ERROR")

    def line(self) -> str:
        """``[kernel-harness] corpus FAIL toy matches-reference 1a2b... (found ... on ...)``."""
        e = self.entry
        head = (f"{PREFIX} corpus {self.status} {e.family} {e.prop} {e.id} "
                f"(found {e.date} on {e.backend}) in {self.seconds:.2f}s")
        if self.status == "PASS":
            return head
        return f"{head}: {self.report.splitlines()[0] if self.report else ''}"


def repro_command(entry: CorpusEntry, case: Any, backend: str, impl_spec: str | None,
                  adjustments: Sequence[str] = ()) -> str:
    """``kernel-harness repro ...`` for ``entry`` (with ``--property``/``--draws`` for a
    metamorphic one) on ``backend``."""
    extra = tuple(adjustments)
    if entry.draws is not None:
        extra += ("--property", entry.prop, "--draws", entry.draws_json or "[]")
    return case_repro_command(entry.family, backend, case, impl_spec, extra)


def replay_entries(
    entries: Sequence[CorpusEntry], family: Family, backend: Backend,
    impl: Callable[..., Any] | None = None, impl_spec: str | None = None,
) -> list[ReplayResult]:
    """Replays every entry of ``family`` once on ``backend`` with ``impl`` (None: the
    family's kernel), in order. Entries of another family are a ValueError (a caller's
    mistake)."""
    wrong = sorted({e.family for e in entries} - {family.name})
    if wrong:
        raise ValueError(f"replay_entries({family.name}): entries of {wrong}")
    return [_replay_one(e, family, backend, impl, impl_spec) for e in entries]


def _replay_one(entry: CorpusEntry, family: Family, backend: Backend,
                impl: Callable[..., Any] | None, impl_spec: str | None) -> ReplayResult:
    start = time.perf_counter()

    def done(status: Status, report: str = "") -> ReplayResult:
        return ReplayResult(entry=entry, status=status, report=report,
                            seconds=time.perf_counter() - start)

    try:
        case = family.case_type.from_json(json.dumps(entry.case))
    except (ValueError, TypeError) as e:
        return done("ERROR", f"{PREFIX} ERROR {entry.family} {entry.prop}: the stored case "
                    f"no longer loads as {family.case_type.__name__}: {e} (case "
                    f"{entry.case_json}); drop it if it no longer means anything")
    unreplayable = _unreplayable(entry, family)
    if unreplayable:
        return done("ERROR", f"{PREFIX} ERROR {entry.family} {entry.prop}: cannot replay "
                    f"entry {entry.id}: {unreplayable}")
    try:
        if entry.prop == "matches-reference":
            result = check_case(family, case, backend, impl, impl_spec=impl_spec)
            return done("PASS") if result.passed else done("FAIL", failure_report(result))
        replay(family, entry.prop, case, backend, entry.draws_json or "[]", impl,
               impl_spec=impl_spec)
        return done("PASS")
    except MetamorphicFailure as e:
        return done("FAIL", str(e))
    except TpuInterpretCannotRun as e:
        return done("SKIP", f"{backend.name} cannot run this case: {e}")
    except Exception as e:  # noqa: BLE001 - a crash is a failure, reported as one
        return done("CRASH", _crash(entry, family, case, backend, impl, impl_spec, e))


def _unreplayable(entry: CorpusEntry, family: Family) -> str:
    """Why ``entry`` cannot be replayed on ``family`` as it is now ("" if it can): checked
    before the run, so an exception during the run is always the implementation's."""
    if entry.prop == "matches-reference":
        return "" if entry.draws is None else "a matches-reference entry with draws"
    spec = spec_for(family, entry.prop)
    if spec is None:
        return (f"{entry.prop!r} is neither matches-reference nor a metamorphic property "
                f"of {family.name}")
    try:
        applicable(family, spec)
        Replayer(entry.draws_json or "[]", family.case_type)
    except (PropertyNotApplicable, ValueError) as e:
        return str(e)
    return ""


def _crash(entry: CorpusEntry, family: Family, case: Any, backend: Backend,
           impl: Callable[..., Any] | None, impl_spec: str | None,
           error: BaseException) -> str:
    extra = () if entry.draws is None else ("--property", entry.prop, "--draws",
                                            entry.draws_json or "[]")
    return Crash(family=family.name, case=case, backend=backend,
                 impl=impl_name(family.kernel if impl is None else impl, impl_spec),
                 impl_spec=impl_spec,
                 adjustments=(*family.adjustments, *extra), error=error).report()
