"""Bad input as data: a family lists invalid configurations of its kernel, each of which
must raise a clear error (``kernel-harness bad-input``, :mod:`kernel_harness.checks.bad_input`).

``Family.bad_inputs`` is a zero-argument function returning :class:`BadInput` entries (built
lazily: it imports the kernel). Each entry calls the kernel's own entry point (not the
harness's case validation, which would reject the configuration first) on small shapes in
interpret mode with one thing wrong, says which message a clear error matches, and declares
what the kernel is known to do: ``clear``, ``unclear`` (raises, but the message does not say
what is wrong) or ``silent`` (returns a result), with the finding in words.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

STATUSES: tuple[str, ...] = ("clear", "unclear", "silent")


@dataclasses.dataclass(frozen=True)
class BadInput:
    """One invalid configuration of one family's kernel.

    Attributes:
      name: what is wrong, in a few words.
      call: runs the kernel on that configuration (interpret mode, small shapes).
      expect: regular expression a clear error message must match.
      status: what the kernel is known to do: ``clear``, ``unclear`` or ``silent``.
      finding: for ``unclear``/``silent``, what happens instead (a finding about the
        kernel, reported every run).
    """

    name: str
    call: Callable[[], Any]
    expect: str
    status: str = "clear"
    finding: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")
        if self.status != "clear" and not self.finding:
            raise ValueError(f"{self.name}: a {self.status} entry needs its finding")
