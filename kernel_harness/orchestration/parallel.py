"""A session's units in several worker processes side by side (``check --jobs N``).

On the CPU backends one check process keeps about one core busy (each example is mostly one
XLA compile), so N workers on N cores finish a many-unit session in about 1/N of the time.
Each worker is its own :class:`~kernel_harness.orchestration.supervisor.Supervisor` (a crash or a
hang ends only that worker's unit; it restarts for its next one). The units are taken in
order from one queue; each unit's report and verdict line print when it ends, so lines of
units running side by side interleave, while the summary keeps the units' order. Seeds are
per unit, so a unit draws the same examples whichever worker runs it. ``--fail-fast`` marks a
family's later units NOT RUN once one of its units has failed; a unit already running on
another worker then still finishes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Protocol

from kernel_harness.orchestration.interrupt import RunInterrupted, requested
from kernel_harness.orchestration.supervisor import Supervisor
from kernel_harness.orchestration.units import Unit, UnitResult


class Session(Protocol):
    """What this module needs of a :class:`~kernel_harness.orchestration.session.CheckSession`
    (which imports this module)."""

    units: Sequence[Unit]

    def run_or_skip(self, unit: Unit, run_one: Callable[[Unit], UnitResult],
                    failed_first: dict[str, str]) -> UnitResult: ...

    def finish_unit(self, unit: Unit, result: UnitResult, failed_first: dict[str, str],
                    done: int, start: float) -> None: ...


def run_units(session: Session, supervisors: list[Supervisor],
              failed_first: dict[str, str], start: float) -> list[UnitResult]:
    """Every unit of ``session``, run by one thread per supervisor; the results in the
    units' order. An exception in a worker thread (a request the worker refuses) is raised
    here once every thread has stopped."""
    units = session.units
    results: list[UnitResult | None] = [None] * len(units)
    lock = threading.Lock()
    queue = iter(range(len(units)))
    errors: list[BaseException] = []
    done = 0

    def work(supervisor: Supervisor) -> None:
        nonlocal done
        while True:
            with lock:
                index = next(queue, None) if not errors and not requested() else None
                if index is None:
                    return
            unit = units[index]
            try:
                result = session.run_or_skip(unit, supervisor.run_unit, failed_first)
            except BaseException as e:  # re-raised in the caller's thread
                with lock:
                    errors.append(e)
                return
            with lock:
                results[index] = result
                done += 1
                session.finish_unit(unit, result, failed_first, done, start)

    threads = [threading.Thread(target=work, args=(s,), daemon=True) for s in supervisors]
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():  # a signal here: each supervisor stops its unit and returns
            try:
                thread.join()
            except RunInterrupted:
                continue
    if errors:
        raise errors[0]
    return [r for r in results if r is not None]


__all__ = ["Session", "run_units"]
