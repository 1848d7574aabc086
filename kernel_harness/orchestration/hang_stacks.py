"""What a hung worker was waiting on: its threads' innermost TPU-interpreter waits, with
the simulated device of each, for the hang report.

The worker runs :func:`serve` (a daemon thread: a hung kernel blocks the main thread in
native code, where no signal handler runs, while the interpreter's device threads wait in
Python and release the GIL). When the supervisor's time limit passes it asks
(:func:`request`) and reads the answer (an ``event: "stacks"`` line in the events file)
before it kills the worker; :func:`describe` turns it into report lines.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from kernel_harness.core.compat.mesh import INTERPRETER_WAITS, interpreter_waits
from kernel_harness.orchestration import watch


def _request_file(events: str) -> Path:
    return Path(f"{events}.stacks")


def request(events: str) -> None:
    """Asks the worker writing ``events`` for its waits."""
    _request_file(events).touch()


def serve(events: str, poll: float = 0.2) -> None:
    """Starts the daemon thread that answers :func:`request` with a ``stacks`` event."""
    def loop() -> None:
        flag = _request_file(events)
        while True:
            if flag.exists():
                flag.unlink(missing_ok=True)
                watch.beat(events, event="stacks", waits=interpreter_waits())
            time.sleep(poll)

    threading.Thread(target=loop, name="kh-hang-stacks", daemon=True).start()


def describe(found: list[dict[str, Any]] | None) -> list[str]:
    """Report lines: which simulated devices wait where; a jax < 0.11 interpreter deadlock
    (every device in buffer allocation) is named as the interpreter's."""
    if found is None:
        return ["  waiting: the worker did not say (no TPU-interpreter wait seen)"]
    if not found:
        return ["  waiting: no thread was blocked in the TPU interpreter"]
    lines = []
    for w in sorted(found, key=lambda w: (str(w["device"]), str(w["core"]))):
        sem = (f" #{w['semaphore']} for {w['value']}" if w.get("semaphore") is not None
               else "")
        at = w.get("kernel_line") or w["where"]
        who = "a device" if w["device"] is None else f"device {w['device']} core {w['core']}"
        lines.append(f"  waiting: {who} {INTERPRETER_WAITS.get(w['wait'], w['wait'])}{sem} at {at}")
    if all("allocate" in w["wait"] for w in found):
        lines.append("  every simulated device waits in the interpreter's buffer allocation: "
                     "the TPU interpreter's own deadlock (jax < 0.11), not the kernel's")
    return lines
