"""A unit of a check session (one family x one property) and what it produced."""

from __future__ import annotations

import dataclasses
from typing import Any

from kernel_harness.checks.flaky import VERDICT as FLAKY
from kernel_harness.records.family import Family

#: The verdicts of a unit that ran and did not pass (``--fail-fast`` stops its family, its
#: report is printed); INTERRUPTED is not one (the run stopped, the unit did not fail).
FAILED_VERDICTS: tuple[str, ...] = ("FAIL", "ERROR", FLAKY)


@dataclasses.dataclass(frozen=True)
class Unit:
    """One family x one property."""

    family: Family
    prop: str

    @property
    def name(self) -> str:
        """``hstu::matches-reference`` (the pytest id, the worker's unit name)."""
        return f"{self.family.name}::{self.prop}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class UnitResult:
    """What one unit produced, the same under every front end."""

    family: str
    prop: str
    backend: str
    #: PASS, FAIL, FLAKY, ERROR, SKIP, NOT RUN or INTERRUPTED.
    verdict: str
    #: The unit's record in the results schema (``check --json``).
    record: dict[str, Any]
    #: The failure report (summary line first, detail, reproduce commands); "" on PASS.
    text: str = ""
    #: One line: ``family  property  VERDICT (n examples, t s)`` or the skip reason.
    line: str = ""
    #: The verdict as the summary shows it: ``FAIL (2 crash kinds)``, ``CRASH``...
    label: str = ""
    #: The property run itself (in-process runs only; None from a worker).
    outcome: Any = None

    @property
    def ran(self) -> bool:
        """Whether the unit ran (SKIP and NOT RUN did not)."""
        return self.verdict not in ("SKIP", "NOT RUN")

    def to_json_dict(self) -> dict[str, Any]:
        """Everything but the in-process outcome (what a worker sends back)."""
        # Not asdict(self): it deep-copies the outcome, and a HarnessFailure in it cannot be
        # rebuilt from its message (the worker died on every failing matches-reference).
        return dataclasses.asdict(dataclasses.replace(self, outcome=None))


def verdict_line(family: str, prop: str, verdict: str, detail: str) -> str:
    """``  hstu         matches-reference    PASS (6 examples, 3.1s)``."""
    return f"  {family:<12} {prop:<20} {verdict}{f' ({detail})' if detail else ''}"


def position_line(families: list[str], done: int, elapsed: float) -> str:
    """``  [3/40 units, families 1 done / 11 left, 1m02s elapsed, ETA 4m10s]`` once a run is
    long enough to want one; ``families`` names each unit's family, in run order. The ETA is
    per family once one is done (a family's properties cost very unequal times, and a family
    without metamorphic hooks has its skipped ones), per unit before."""
    total = len(families)
    if total <= 1 or elapsed < 20:
        return ""
    last = {name: i for i, name in enumerate(families, 1)}
    finished = sum(1 for i in last.values() if i <= done)
    if finished:
        eta = elapsed / finished * (len(last) - finished)
    else:
        eta = elapsed / done * (total - done)
    return (f"  [{done}/{total} units, families {finished} done / {len(last) - finished} left, "
            f"{_clock(elapsed)} elapsed, ETA {_clock(eta)}]")


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"
