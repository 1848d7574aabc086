"""Long runs: a per-example time limit (``check --timeout``) and progress lines.

A kernel that hangs inside XLA or a Pallas interpreter loop cannot be interrupted
from Python, so with ``--timeout`` the properties run in a worker process, one per
family (``kernel-harness check FAMILY --heartbeat-file F``), which writes a line to
``F`` when each example's kernel starts and ends and when each property finishes
(its JSON record). The supervisor reads that file; an example running longer than
the limit gets the worker killed (its whole process group), a FAIL record naming
the case with its repro command, and a fresh worker for the family's remaining
properties. Cost: one worker start (jax import, about 3-5 s here) per family and
per timeout, and compiled programs are not shared between families' workers.

Progress: ``Progress`` prints ``examples done (checks), rate, failed and rejected so far``
for the running property at most once per interval (default 30 s), checked when an example
starts. A rejected example (``assume()``) is never counted as failed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kernel_harness.checks.properties import Observer
from kernel_harness.cli import results
from kernel_harness.spec.family import Family

POLL_SECONDS = 0.2


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


def _beat(path: str | None, **event: Any) -> None:
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
        _beat(heartbeat, event="start", property=prop, case=case.to_json())
        out = inner(impl, case, inputs, backend)
        _beat(heartbeat, event="end", property=prop)
        return out

    return dataclasses.replace(family, run=run)


def emit_record(heartbeat: str | None, record: dict[str, Any]) -> None:
    """Hands one finished property's JSON record to the supervisor."""
    _beat(heartbeat, event="record", record=record)


def _timeout_record(family: str, prop: str, backend: str, case_json: str, seconds: float,
                    timeout: float, impl: str | None, extra: Sequence[str]) -> dict[str, Any]:
    parts = ["kernel-harness", "repro", family, "--backend", backend, "--case", case_json]
    if impl:
        parts += ["--impl", impl]
    repro = shlex.join([*parts, *extra])
    message = (f"[kernel-harness] FAIL {family} {prop} backend={backend}: the kernel did not "
               f"return within --timeout {timeout:g}s (killed after {seconds:.0f}s) on case "
               f"{case_json}")
    failure = {"case": json.loads(case_json), "case_json": case_json, "impl": impl or "",
               "summary": [message], "outputs": [], "excluded": {}, "repro": repro,
               "timeout_seconds": timeout}
    return {"family": family, "property": prop, "backend": backend, "verdict": "FAIL",
            "examples": 1, "passed_examples": 0, "checks": 1, "compiles": 1, "rejected": 0,
            "seconds": round(seconds, 3), "events": {},
            "failure": failure, "error": None, "reason": None}


def supervise_family(
    family: str, props: Sequence[str], *, child_args: Callable[[Sequence[str], str], list[str]],
    timeout: float, backend: str, impl: str | None, extra_repro: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Runs ``props`` of ``family`` in workers under the time limit; returns their records."""
    records: list[dict[str, Any]] = []
    remaining = list(props)
    while remaining:
        with tempfile.TemporaryDirectory(prefix="kh-watch-") as tmp:
            beat = Path(tmp) / "heartbeat.jsonl"
            beat.touch()
            cmd = [sys.executable, "-m", "kernel_harness.cli", *child_args(remaining, str(beat))]
            proc = subprocess.Popen(cmd, start_new_session=True)
            timed_out, done, running = None, 0, None
            while True:
                lines = beat.read_text().splitlines()
                for line in lines[done:]:
                    event = json.loads(line)
                    if event["event"] == "start":
                        running = event
                    elif event["event"] == "end":
                        running = None
                    elif event["event"] == "record":
                        records.append(event["record"])
                        if event["record"]["property"] in remaining:
                            remaining.remove(event["record"]["property"])
                done = len(lines)
                if proc.poll() is not None:
                    break
                if running is not None and time.time() - running["time"] > timeout:
                    timed_out = running
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    break
                time.sleep(POLL_SECONDS)
        if timed_out is not None:
            prop = timed_out["property"]
            record = _timeout_record(family, prop, backend, timed_out["case"],
                                     time.time() - timed_out["time"], timeout, impl,
                                     extra_repro)
            print(f"\n=== {family} / {prop} TIMED OUT on {backend} ===\n"
                  f"{record['failure']['summary'][0]}\n  reproduce: {record['failure']['repro']}",
                  flush=True)
            records.append(record)
            remaining = remaining[remaining.index(prop) + 1:] if prop in remaining else remaining
        elif remaining:  # the worker ended without reporting them: a crash, never a pass
            for prop in remaining:
                records.append({**results.skip_record(family, prop, backend, ""),
                                "verdict": "ERROR", "reason": None, "error": {
                                    "type": "WorkerDied",
                                    "message": f"the worker exited with {proc.returncode} "
                                    f"before reporting {prop}"}})
            remaining = []
    return records
