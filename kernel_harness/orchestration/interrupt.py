"""A run ends cleanly on SIGTERM, SIGINT or SIGHUP (a preempted nightly keeps its results).

The first signal raises :class:`RunInterrupted` in the main thread (and sets a flag that the
threads of ``--jobs`` poll): the unit in progress is stopped (its worker process is sent
SIGTERM and answers with what it has: examples so far, any failure found, stored in the
corpus), marked ``INTERRUPTED``, and the run writes its JSON, JUnit and summary and exits
with :data:`EXIT_INTERRUPTED`. A second signal ends the process at once (its workers too).
Only front ends that own the process install the handlers (``kernel-harness check`` and the
worker); a library call never does.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

#: ``kernel-harness check``'s exit status after an interrupt (0 pass, 1 fail, 2 bad input).
EXIT_INTERRUPTED = 3
SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

_requested: list[str] = []
_workers: set[int] = set()


class RunInterrupted(BaseException):
    """A signal asked the run to stop (a BaseException: no ``except Exception`` of a
    property or of Hypothesis takes it for a failure)."""

    def __init__(self, name: str) -> None:
        super().__init__(f"interrupted by {name}")
        self.name = name


def requested() -> str | None:
    """The name of the signal that interrupted this process (None: none yet)."""
    return _requested[0] if _requested else None


def track_worker(pid: int, alive: bool) -> None:
    """Registers (or forgets) a worker's process group, ended by a second signal."""
    (_workers.add if alive else _workers.discard)(pid)


def _in_gc_callback(frame: Any) -> bool:
    """Whether ``frame`` (or a caller) is a garbage-collector callback (Hypothesis registers
    one): an exception raised there is printed as "Exception ignored" and lost."""
    codes = {getattr(cb, "__code__", None) for cb in gc.callbacks}
    while frame is not None:
        if frame.f_code in codes:
            return True
        frame = frame.f_back
    return False


def _handler(signum: int, frame: Any) -> None:
    name = signal.Signals(signum).name
    if (not _requested and threading.current_thread() is threading.main_thread()
            and _in_gc_callback(frame)):
        # Seen on CI: the interrupt raised inside Hypothesis's gc callback was lost (and
        # its traceback printed); the same signal again in 50 ms lands outside it.
        threading.Timer(0.05, os.kill, (os.getpid(), signum)).start()
        return
    if _requested:  # the second signal: at once
        for pid in list(_workers):
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
        os._exit(128 + signum)
    _requested.append(name)
    if threading.current_thread() is threading.main_thread():
        raise RunInterrupted(name)


@contextlib.contextmanager
def handling(signals: tuple[signal.Signals, ...] = SIGNALS) -> Iterator[None]:
    """Within: ``signals`` interrupt the run as the module docstring says; after, the
    previous handlers are back."""
    previous = {s: signal.signal(s, _handler) for s in signals}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
