"""Units run in a long-lived worker process, so that a hang or a native crash of the kernel
is a report like any other failure and the run goes on.

One worker (:mod:`kernel_harness.orchestration.worker`) serves a whole session: it imports jax
once, keeps its compiled programs across families, and runs the units it is sent one at a
time. Its events file says which case each kernel run is on. When the worker dies (a
segfault, an abort, an illegal address on a device) the unit it was running is a FAIL
naming the signal, the case, the last lines of the worker's stderr and a repro command;
when a kernel run passes the time limit the worker is killed and the unit is a FAIL
naming the case. Either way the next unit gets a fresh worker.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from kernel_harness.core.errors import UsageError
from kernel_harness.orchestration import hang_stacks, interrupt, results
from kernel_harness.orchestration.interrupted_unit import from_events, renamed
from kernel_harness.orchestration.units import Unit, UnitResult
from kernel_harness.run.report import PREFIX, case_repro_command

POLL_SECONDS = 0.05
#: How long an interrupted worker has to answer with its unit's partial result.
ANSWER_SECONDS = 20.0
#: The line a worker writes to its stdout after each unit: everything it printed for the
#: unit has been passed on once the supervisor has read it.
UNIT_DONE = "\x00kernel-harness unit done"
#: How the worker says it cannot take the request (a usage error, never a crash report).
WORKER_ERROR = "kernel-harness worker: error:"
#: Lines of the worker's stderr kept, and shown in a crash report.
STDERR_TAIL = 400
SHOWN_LINES = 12


def crash_excerpt(lines: list[str]) -> list[str]:
    """What a crash report shows of the worker's stderr: faulthandler's dump from its
    first line (the innermost frames, the kernel's own, come first), else the last lines."""
    starts = [i for i, line in enumerate(lines) if line.startswith("Fatal Python error")]
    if starts:
        return lines[starts[-1]:starts[-1] + SHOWN_LINES]
    return lines[-SHOWN_LINES:]


def signal_name(returncode: int) -> str:
    """``SIGSEGV (signal 11)`` for a process a signal ended, else ``exit status N``."""
    if returncode < 0:
        try:
            return f"{signal.Signals(-returncode).name} (signal {-returncode})"
        except ValueError:
            return f"signal {-returncode}"
    return f"exit status {returncode}"


class Supervisor:
    """Runs a session's units in a worker process, restarting it after a crash or a hang."""

    def __init__(self, request_line: str, *, backend: str, timeout: float | None,
                 impl_spec: str | None, impl_label: str | None) -> None:
        self.request_line = request_line
        self.backend, self.timeout = backend, timeout
        self.impl_spec, self.impl_label = impl_spec, impl_label
        self._tmp = tempfile.TemporaryDirectory(prefix="kh-worker-")
        self._proc: subprocess.Popen[str] | None = None
        self._events: Path | None = None
        self._offset = 0
        self._stderr: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL)
        self._starts = 0
        #: Lines the workers leave for the summary (tpu-interpret diagnostics), and their
        #: kernel-branch coverage (``--kernel-coverage``; a worker that died leaves none).
        self.notes: list[str] = []
        self.coverage: list[dict[str, Any]] = []

    def _start(self) -> None:
        self._starts += 1
        self._events = Path(self._tmp.name) / f"events-{self._starts}.jsonl"
        self._events.touch()
        self._offset = 0
        self._stderr.clear()
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "kernel_harness.orchestration.worker", str(self._events)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True,
        )
        interrupt.track_worker(self._proc.pid, alive=True)
        assert self._proc.stdin is not None
        self._proc.stdin.write(self.request_line + "\n")
        self._proc.stdin.flush()
        self._unit_done = threading.Event()
        threading.Thread(target=self._pump_stderr, args=(self._proc,), daemon=True).start()
        threading.Thread(target=self._pump_stdout, args=(self._proc, self._unit_done),
                         daemon=True).start()

    def _pump_stderr(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            sys.stderr.write(line)
            self._stderr.append(line.rstrip("\n"))

    def _pump_stdout(self, proc: subprocess.Popen[str], done: threading.Event) -> None:
        """The worker's output goes on through this process's stdout (live, and where a
        caller captures it), in order with what the session prints after each unit."""
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.rstrip("\n") == UNIT_DONE:
                done.set()
                continue
            sys.stdout.write(line)
            sys.stdout.flush()
        done.set()

    def _read_events(self) -> list[dict[str, Any]]:
        assert self._events is not None
        with open(self._events) as f:
            f.seek(self._offset)
            data = f.read()
        complete = data[: data.rfind("\n") + 1]
        self._offset += len(complete)
        return [json.loads(line) for line in complete.splitlines() if line.strip()]

    def run_unit(self, unit: Unit) -> UnitResult:
        """The unit's result from the worker, or a FAIL naming the crash or the hang."""
        if self._proc is None or self._proc.poll() is not None:
            self._start()
        proc = self._proc
        assert proc is not None and proc.stdin is not None
        try:
            proc.stdin.write(unit.name + "\n")
            proc.stdin.flush()
        except BrokenPipeError:
            pass  # it died already: the loop below reports it
        try:
            return self._wait(unit, proc)
        except interrupt.RunInterrupted as e:
            return self._interrupt(unit, proc, e.name)

    def _interrupt(self, unit: Unit, proc: subprocess.Popen[str], name: str) -> UnitResult:
        """Stops the worker's unit (SIGTERM: it answers with what it has) and returns its
        INTERRUPTED result; a worker silent for :data:`ANSWER_SECONDS` is killed."""
        start = time.time()
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGTERM)
        examples = 0
        while time.time() - start < ANSWER_SECONDS:
            for event in self._read_events():
                examples += event["event"] == "start"
                if event["event"] == "result" and event["unit"] == unit.name:
                    proc.wait(timeout=ANSWER_SECONDS)
                    self._unit_done.wait(timeout=5)
                    self._ended(proc)
                    return renamed(UnitResult(**event["result"]), name)
            if proc.poll() is not None and not self._read_events():
                break
            time.sleep(POLL_SECONDS)
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        self._ended(proc)
        return from_events(family=unit.family.name, prop=unit.prop, backend=self.backend,
                           examples=examples, seconds=time.time() - start, name=name)

    def _ended(self, proc: subprocess.Popen[str]) -> None:
        interrupt.track_worker(proc.pid, alive=False)
        self._proc = None

    def _wait(self, unit: Unit, proc: subprocess.Popen[str]) -> UnitResult:
        running: dict[str, Any] | None = None
        start = time.time()
        timeout = self.timeout
        while True:
            name = interrupt.requested()
            if name is not None:  # a --jobs thread: the main thread took the signal
                return self._interrupt(unit, proc, name)
            for event in self._read_events():
                if event["event"] == "start":
                    running = event
                elif event["event"] == "end":
                    running = None
                elif event["event"] == "result" and event["unit"] == unit.name:
                    self._unit_done.wait(timeout=30)
                    self._unit_done.clear()
                    return UnitResult(**event["result"])
            if proc.poll() is not None:
                for event in self._read_events():  # written just before it ended
                    if event["event"] == "result" and event["unit"] == unit.name:
                        self._unit_done.clear()
                        return UnitResult(**event["result"])
                    if event["event"] == "start":
                        running = event
                self._proc = None
                time.sleep(POLL_SECONDS)  # let the stderr pump catch the last lines
                refused = [line for line in self._stderr if line.startswith(WORKER_ERROR)]
                if proc.returncode == 2 and refused:  # the request, not the kernel
                    raise UsageError(refused[-1].removeprefix(WORKER_ERROR).strip())
                return self._died(unit, running, proc.returncode, time.time() - start)
            if timeout and running is not None and time.time() - running["time"] > timeout:
                waits = self._waits()
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                self._proc = None
                return self._hung(unit, running, time.time() - start, waits)
            time.sleep(POLL_SECONDS)

    def _repro(self, unit: Unit, case_json: str) -> str:
        case = unit.family.case_type.from_json(case_json)
        return case_repro_command(unit.family.name, self.backend, case, self.impl_spec,
                                  unit.family.adjustments)

    def _failed(self, unit: Unit, label: str, summary: str, detail: list[str],
                case_json: str | None, seconds: float, **extra: Any) -> UnitResult:
        backend = self.backend
        repro = self._repro(unit, case_json) if case_json is not None else None
        lines = [summary, *detail]
        if repro is not None:
            note = "" if unit.prop == "matches-reference" else (
                "  (replays the case through matches-reference: the kernel call that died)\n")
            lines.append(f"{note}  reproduce: {repro}")
        failure = None
        if case_json is not None:
            failure = {"case": json.loads(case_json), "case_json": case_json,
                       "impl": self.impl_label or "", "summary": [summary],
                       "outputs": [], "excluded": {}, "repro": repro, **extra}
        record = {**results.skip_record(unit.family.name, unit.prop, backend, ""),
                  "verdict": "FAIL" if failure is not None else "ERROR", "reason": None,
                  "examples": 1, "checks": 1, "rejected": 0,
                  "seconds": round(seconds, 3), "failure": failure,
                  "error": None if failure is not None else {"type": "WorkerDied",
                                                             "message": summary}}
        verdict = record["verdict"]
        return UnitResult(family=unit.family.name, prop=unit.prop, backend=backend,
                          verdict=verdict, record=record, text="\n".join(lines), label=label,
                          line=f"  {unit.family.name:<12} {unit.prop:<20} {label} "
                          f"({seconds:.1f}s)")

    def _died(self, unit: Unit, running: dict[str, Any] | None, code: int,
              seconds: float) -> UnitResult:
        how = signal_name(code)
        where = (f"while running case {running['case']}" if running is not None
                 else "outside any kernel run")
        summary = (f"{PREFIX} CRASH {unit.family.name} {unit.prop} "
                   f"backend={self.backend}: the worker process died of {how} "
                   f"{where}")
        tail = crash_excerpt(list(self._stderr))
        detail = ["  last lines of the worker's stderr:", *(f"    {t}" for t in tail)] if tail \
            else ["  (the worker wrote nothing to stderr)"]
        detail.append("  not shrunk: the process died on this example (the examples before it "
                      "in this unit passed or were judged)")
        label = f"CRASH ({how.split(' ')[0]})"
        return self._failed(unit, label, summary, detail,
                            None if running is None else running["case"], seconds,
                            crash_signal=how)

    def _waits(self) -> list[dict[str, Any]] | None:
        """What the hung worker's simulated devices wait on (:mod:`.hang_stacks`), or None
        when it does not answer within 3 s."""
        assert self._events is not None
        hang_stacks.request(str(self._events))
        deadline = time.time() + 3
        while time.time() < deadline:
            for event in self._read_events():
                if event["event"] == "stacks":
                    return event["waits"]
            time.sleep(POLL_SECONDS)
        return None

    def _hung(self, unit: Unit, running: dict[str, Any], seconds: float,
              waits: list[dict[str, Any]] | None = None) -> UnitResult:
        timeout = self.timeout
        summary = (f"{PREFIX} FAIL {unit.family.name} {unit.prop} "
                   f"backend={self.backend}: the kernel did not return within "
                   f"--timeout {timeout:g}s (killed after {time.time() - running['time']:.0f}s)"
                   f" on case {running['case']}")
        # A collective's report always says what its devices waited on (or that the worker
        # did not say); another family's only when something waited in the interpreter.
        detail = (hang_stacks.describe(waits) if waits or unit.family.devices > 1 else [])
        return self._failed(unit, "FAIL (timeout)", summary, detail, running["case"], seconds,
                            timeout_seconds=timeout)

    def close(self) -> None:
        """Ends the worker (end of input), keeps its closing notes, removes its files."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            assert proc.stdin is not None
            try:
                proc.stdin.close()
                proc.wait(timeout=60)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                os.killpg(proc.pid, signal.SIGKILL)
            for event in self._read_events():
                if event["event"] == "notes":
                    self.notes += event["lines"]
                    if event.get("coverage") is not None:
                        self.coverage.append(event["coverage"])
        self._proc = None
        self._tmp.cleanup()
