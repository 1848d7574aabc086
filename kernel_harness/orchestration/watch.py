"""Watching a property run: heartbeat lines around each example's kernel run, and progress.

A worker process (:mod:`kernel_harness.orchestration.worker`) writes a line to its events file
when each example's kernel starts (with the case) and ends, so its supervisor
(:mod:`kernel_harness.orchestration.supervisor`) knows which case a hang or a crash hit.

Progress: ``Progress`` prints ``examples done (checks), rate, failed and rejected so far``
for the running property at most once per interval (default 30 s), checked when an example
starts. A rejected example (``assume()``) is never counted as failed.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

from kernel_harness.checks.properties import Observer
from kernel_harness.records.family import Family


@dataclasses.dataclass
class Progress:
    """Prints one progress line per ``every`` seconds at most, for one property."""

    family: str
    prop: str
    observer: Observer
    every: float = 30.0
    start: float = dataclasses.field(default_factory=lambda: time.monotonic())
    last: float = dataclasses.field(default_factory=lambda: time.monotonic())

    def tick(self) -> None:
        """Called as an example starts; prints when ``every`` seconds have passed."""
        now = time.monotonic()
        if self.every <= 0 or now - self.last < self.every:
            return
        self.last = now
        obs = self.observer
        rate = obs.examples / max(now - self.start, 1e-9) * 60
        print(f"  progress {self.family} {self.prop}: {obs.examples} examples "
              f"({obs.checks} checks) in {now - self.start:.0f}s ({rate:.1f}/min), "
              f"{obs.failed} failed, {obs.rejected} rejected so far", flush=True)


def beat(path: str | None, **event: Any) -> None:
    if path is None:
        return
    with open(path, "a") as f:
        f.write(json.dumps({"time": time.time(), **event}) + "\n")
        f.flush()


def instrument(family: Family, prop: str, *, heartbeat: str | None,
               progress: Progress | None) -> Family:
    """The family with its adapter wrapped: progress ticks, and heartbeat lines around each
    example's kernel run (for the supervisor's time limit)."""
    if heartbeat is None and progress is None:
        return family
    inner = family.run

    def run(impl: Any, case: Any, inputs: Any, backend: Any) -> Any:
        if progress is not None:
            progress.tick()
        beat(heartbeat, event="start", property=prop, case=case.to_json())
        out = inner(impl, case, inputs, backend)
        beat(heartbeat, event="end", property=prop)
        return out

    return dataclasses.replace(family, run=run)


def emit_record(heartbeat: str | None, record: dict[str, Any]) -> None:
    """Hands one finished property's JSON record to the supervisor."""
    beat(heartbeat, event="record", record=record)
