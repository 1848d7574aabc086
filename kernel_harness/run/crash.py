"""An exception inside the kernel, reported like a failure: one line first (exception
type and message, the case), the last frames of the kernel's own code, the repro command.

Crashes are grouped by *kind* (exception type and the innermost frame of the
kernel's own code), so a run that hits the same missing feature 40 times prints it
once with a count.
"""

from __future__ import annotations

import dataclasses
import os
import traceback
from typing import Any

from kernel_harness.core.backends import Backend
from kernel_harness.run.report import PREFIX, case_repro_command

#: Path fragments of frames that are not the kernel author's code.
_NOT_OWN = (
    f"{os.sep}jax{os.sep}", f"{os.sep}jaxlib{os.sep}", f"{os.sep}hypothesis{os.sep}",
    f"{os.sep}numpy{os.sep}", f"{os.sep}kernel_harness{os.sep}run{os.sep}",
    f"{os.sep}kernel_harness{os.sep}checks{os.sep}",
    f"{os.sep}kernel_harness{os.sep}families{os.sep}",
    f"{os.sep}kernel_harness{os.sep}core{os.sep}", f"{os.sep}kernel_harness{os.sep}cli{os.sep}",
    "<frozen ",
)


def _own(error: BaseException) -> tuple[list[traceback.FrameSummary], bool]:
    frames = traceback.extract_tb(error.__traceback__)
    own = [f for f in frames if not any(p in f.filename for p in _NOT_OWN)]
    return (own, True) if own else (frames, False)


def own_frames(error: BaseException, limit: int = 3) -> list[traceback.FrameSummary]:
    """The last ``limit`` frames of ``error``'s traceback outside jax, numpy, Hypothesis
    and the harness (the kernel's own code); the last ``limit`` frames if none is."""
    return _own(error)[0][-limit:]


def raised_in_implementation(error: BaseException) -> bool:
    """Whether any frame of ``error``'s traceback is the implementation's own code (if
    not, the harness, its adapter or jax raised: said so in the report)."""
    return _own(error)[1]


def crash_kind(error: BaseException) -> str:
    """``NotImplementedError at my_kernel.py:41``: what makes two crashes the same."""
    frames = own_frames(error, 1)
    where = f" at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else ""
    return f"{type(error).__name__}{where}"


def _message(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    first = text[0] if text else ""
    return first if len(first) <= 300 else first[:297] + "..."


@dataclasses.dataclass(frozen=True, kw_only=True)
class Crash:
    """One crashing example: the family, the case, what raised, how to replay it."""

    family: str
    case: Any
    backend: Backend
    impl: str
    impl_spec: str | None
    adjustments: tuple[str, ...]
    error: BaseException

    @property
    def kind(self) -> str:
        return crash_kind(self.error)

    def summary_line(self) -> str:
        """``[kernel-harness] CRASH sdpa float32 q=(...) backend=interpret: TypeError: ...``."""
        describe = getattr(self.case, "shape_summary", None)
        shape = describe() if callable(describe) else ""
        return (
            f"{PREFIX} CRASH {self.family} {self.case.dtype} {shape} "
            f"backend={self.backend.name}: {type(self.error).__name__}: {_message(self.error)}"
        ).replace("  ", " ")

    def report(self) -> str:
        """Summary line, where in the kernel's code, the case, and the repro command."""
        lines = [self.summary_line(), f"  impl:     {self.impl}", f"  case:     {self.case!r}"]
        if raised_in_implementation(self.error):
            lines.append("  raised in (last frames of the implementation's code):")
        else:
            lines.append("  raised outside the implementation's code (the family's adapter, "
                         "reference or jax; last frames):")
        lines += [f"    {f.filename}:{f.lineno} in {f.name}: {(f.line or '').strip()}"
                  for f in own_frames(self.error)]
        command = case_repro_command(
            self.family, self.backend.name, self.case, self.impl_spec, self.adjustments
        )
        lines.append(f"  reproduce: {command}")
        return "\n".join(lines)


class KernelCrash(AssertionError):
    """The implementation raised on a case; the message is the crash report."""

    def __init__(self, crash: Crash):
        super().__init__(crash.report())
        self.crash = crash
