"""An exception inside the kernel, reported like a failure: one line first (exception
type and message, the case), the last frames of the kernel's own code, the repro command.

Crashes are grouped by *kind* (exception type and the innermost frame of the
kernel's own code), so a run that hits the same missing feature 40 times prints it
once with a count.

An exception raised inside a jax host callback (the TPU interpreter runs kernels through
them) reaches Python as an ``XlaRuntimeError`` ("CpuCallback error") whose own frames are
jax's; the report names the real exception instead: the first one in the exception's
chain that is not a jax runtime error, else the traceback text the runtime error carries
(:func:`origin`).
"""

from __future__ import annotations

import dataclasses
import os
import re
import traceback
from typing import Any

from kernel_harness.core.backends import Backend
from kernel_harness.core.compat.forced_settings import raised_under
from kernel_harness.run.report import PREFIX, case_repro_command

#: Path fragments of frames that are not the kernel author's code.
_NOT_OWN = (
    f"{os.sep}jax{os.sep}", f"{os.sep}jaxlib{os.sep}", f"{os.sep}hypothesis{os.sep}",
    f"{os.sep}numpy{os.sep}", "<frozen ",
)
#: The harness's own package: every frame in it is plumbing (its adapters, records, ops,
#: front ends: a crash there is not "the implementation's code", issue 56), except
#: its own kernels (``kernel_harness/kernels/``), which are implementations.
_HARNESS = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_HARNESS_KERNELS = os.path.join(_HARNESS, "kernels") + os.sep


#: The type names of jax's runtime errors, which wrap an exception raised in a callback.
_RUNTIME_ERRORS = ("XlaRuntimeError", "JaxRuntimeError")
_FRAME_LINE = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<name>.+)$')
_EXCEPTION_LINE = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\w*)"
                             r"(: (?P<message>.*))?$")


@dataclasses.dataclass(frozen=True)
class Origin:
    """The exception a crash report names: its type name, message and traceback frames."""

    type_name: str
    message: str
    frames: tuple[traceback.FrameSummary, ...]
    #: How it was found when it is not the raised exception itself ("" when it is).
    found: str = ""


def _from_text(text: str) -> Origin | None:
    """The last exception of a Python traceback printed in ``text`` (a callback's error as
    the jax runtime carries it in its message), or None if there is none."""
    lines = text.splitlines()
    starts = [i for i, ln in enumerate(lines) if "Traceback (most recent call last)" in ln]
    if not starts:
        return None
    frames: list[traceback.FrameSummary] = []
    for i, ln in enumerate(lines[starts[-1] + 1:], starts[-1] + 1):
        frame = _FRAME_LINE.match(ln)
        if frame is not None:
            code = lines[i + 1].strip() if i + 1 < len(lines) else ""
            frames.append(traceback.FrameSummary(
                frame["file"], int(frame["line"]), frame["name"].strip(),
                line=None if _FRAME_LINE.match(code) else code))
            continue
        raised = _EXCEPTION_LINE.match(ln.strip())
        if raised is not None and frames:
            return Origin(raised["type"].rsplit(".", 1)[-1], raised["message"] or "",
                          tuple(frames), found="the traceback in the jax runtime error")
    return None


def origin(error: BaseException) -> Origin:
    """What a report names for ``error``: ``error`` itself, or, for a jax runtime error
    that wraps an exception raised in a host callback (the TPU interpreter's
    ``CpuCallback error``), that exception: the first of its ``__cause__``/``__context__``
    chain that is not a runtime error, else the traceback text in its message."""
    own = Origin(type(error).__name__, _first_line(error),
                 tuple(traceback.extract_tb(error.__traceback__)))
    if type(error).__name__ not in _RUNTIME_ERRORS:
        return own
    seen, link = {id(error)}, error.__cause__ or error.__context__
    while link is not None and id(link) not in seen:
        if type(link).__name__ not in _RUNTIME_ERRORS:
            inner = origin(link)
            return dataclasses.replace(inner, found="the exception chain")
        seen.add(id(link))
        link = link.__cause__ or link.__context__
    inner = _from_text(str(error))
    if inner is None:
        return own
    # The callback ran inside the call that raised: its frames follow the caller's (the
    # TPU interpreter's own frames are jax's, so the kernel's call site is what remains).
    return dataclasses.replace(inner, frames=own.frames + inner.frames)


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else ""


#: The standard library (threading, concurrent.futures: a callback's worker thread);
#: installed packages live under it too, in site-packages, and stay the kernel's own.
_STDLIB = os.path.dirname(os.__file__) + os.sep


def is_own_frame(filename: str) -> bool:
    """Whether a frame of ``filename`` is the implementation's own code: not jax, numpy,
    Hypothesis, the standard library or the harness (its own kernels excepted)."""
    if any(p in filename for p in _NOT_OWN):
        return False
    path = os.path.abspath(filename)
    if path.startswith(_HARNESS):
        return path.startswith(_HARNESS_KERNELS)
    return not (filename.startswith(_STDLIB) and "-packages" not in filename)


def _own(error: BaseException) -> tuple[list[traceback.FrameSummary], bool]:
    frames = list(origin(error).frames)
    own = [f for f in frames if not not is_own_frame(f.filename)]
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
    return f"{origin(error).type_name}{where}"


def crash_summary(error: BaseException) -> str:
    """``ValueError: the page table ...``: what raised at the origin (through a host
    callback's or jax's wrapping: :func:`origin`), its message's first line, at most 160
    characters (``kernel-harness mutate``'s kill column)."""
    found = origin(error)
    lines = found.message.strip().splitlines()
    first = lines[0] if lines else ""
    return f"{found.type_name}: {first if len(first) <= 160 else first[:157] + '...'}"


def _message(error: BaseException) -> str:
    first = origin(error).message
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
    #: The property that crashed when it is not matches-reference (its name is then in
    #: the summary line; ``adjustments`` carry its ``--property P --draws JSON``).
    prop: str | None = None
    #: Lines of detail after the case (which run of the example raised).
    notes: tuple[str, ...] = ()
    #: Why the example cannot be replayed (None: the reproduce command replays it).
    not_replayable: str | None = None

    @property
    def kind(self) -> str:
        return crash_kind(self.error)

    def summary_line(self) -> str:
        """``[kernel-harness] CRASH sdpa float32 q=(...) backend=interpret: TypeError: ...``."""
        describe = getattr(self.case, "shape_summary", None)
        shape = describe() if callable(describe) else ""
        prop = f"{self.prop} " if self.prop else ""
        return (
            f"{PREFIX} CRASH {self.family} {prop}{self.case.dtype} {shape} "
            f"backend={self.backend.name}: {origin(self.error).type_name}: "
            f"{_message(self.error)}"
        ).replace("  ", " ")

    def report(self) -> str:
        """Summary line, where in the kernel's code, the case, and the repro command."""
        lines = [self.summary_line(), f"  impl:     {self.impl}", f"  case:     {self.case!r}",
                 *(f"  {n}" for n in self.notes)]
        forced = raised_under(self.error)
        if forced is not None and getattr(self.error, "diagnosis", None) is None:
            lines.append(
                "  ran under TPU interpret mode forced by the harness (the family's adapter "
                "asked for it: Backend.forcing_interpret), not the kernel's own interpret "
                f"switch; settings: {forced[:160]}. Where jax's TPU interpreter cannot run "
                "the kernel so and its own interpret=True can, give an --impl that calls it "
                "with its own switch (docs/backends.md)")
        found = origin(self.error).found
        if found:
            raised = f"{type(self.error).__name__}: {_first_line(self.error)[:120]}"
            lines.append(f"  (jax raised {raised}; the exception named above is from {found})")
        diagnosis = getattr(self.error, "diagnosis", None)
        if diagnosis is not None:  # tpu-interpret's diagnostics: the kernel's lines are in them
            lines.append("  found by TPU interpret mode's diagnostics (each names the kernel's "
                         "source line):")
            lines += [f"  {line}" for line in str(self.error).splitlines()[1:]]
        elif raised_in_implementation(self.error):
            lines.append("  raised in (last frames of the implementation's code):")
        else:
            lines.append("  raised outside the implementation's code (the family's adapter, "
                         "reference or jax; last frames):")
        if diagnosis is None:
            lines += [f"    {f.filename}:{f.lineno} in {f.name}: {(f.line or '').strip()}"
                      for f in own_frames(self.error)]
        if self.not_replayable is not None:
            lines.append(f"  reproduce: not replayable ({self.not_replayable})")
            return "\n".join(lines)
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

    def __reduce__(self) -> tuple[Any, ...]:
        # Copies and pickles rebuild it from the crash, not from the message.
        return (type(self), (self.crash,))
