"""The worker process of :mod:`kernel_harness.orchestration.supervisor`:
``python -m kernel_harness.orchestration.worker EVENTS``.

Standard input: the session's request (one JSON line), then one unit name per line
(``family::property``). For each unit the worker runs it in-process and appends its result
to EVENTS; while a kernel runs, EVENTS says which case (the heartbeat). It ends at the end
of its input.
"""

from __future__ import annotations

import contextlib
import dataclasses
import faulthandler
import json
import signal
import sys

from kernel_harness.core import devices
from kernel_harness.core.errors import UsageError
from kernel_harness.orchestration import hang_stacks, interrupt, watch
from kernel_harness.orchestration.session import CheckRequest, CheckSession
from kernel_harness.orchestration.supervisor import UNIT_DONE, WORKER_ERROR
from kernel_harness.run import kernel_coverage


def main(argv: list[str]) -> int:
    """Serves units until the end of standard input; exit 2 on a request it cannot take."""
    (events,) = argv
    devices.request_cpu_devices()  # before anything starts jax: collective families
    faulthandler.enable()  # a native crash leaves the Python stack on stderr for the report
    request = CheckRequest.from_json_dict(json.loads(sys.stdin.readline()))
    try:
        session = CheckSession(dataclasses.replace(request, heartbeat_file=events))
    except UsageError as e:
        print(f"{WORKER_ERROR} {e} (in the worker process: a family or impl given as an "
              "object must be importable there; or run with --no-isolate)", file=sys.stderr)
        return 2
    units = {unit.name: unit for unit in session.units}
    hang_stacks.serve(events)  # a hung kernel: what its simulated devices wait on
    with contextlib.ExitStack() as stack:
        # The supervisor's SIGTERM stops the unit; the worker answers with what it has.
        stack.enter_context(interrupt.handling((signal.SIGTERM,)))
        coverage = (stack.enter_context(kernel_coverage.recording())
                    if request.kernel_coverage else None)
        for line in sys.stdin:
            name = line.strip()
            if not name:
                continue
            result = session.run_unit(units[name])
            print(UNIT_DONE, flush=True)
            watch.beat(events, event="result", unit=name, result=result.to_json_dict())
            if interrupt.requested():
                return 3
    watch.beat(events, event="notes", lines=session.closing_notes(),
               coverage=None if coverage is None else coverage.to_json())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
