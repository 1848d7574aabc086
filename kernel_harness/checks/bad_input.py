"""Bad input: invalid configurations must raise a clear error, never compute garbage.

Per family, a list of :class:`~kernel_harness.records.bad_input.BadInput` entries
(``Family.bad_inputs``) calls the kernel's own entry
point (not the harness's case validation, which would reject them first) on
the ``interpret`` backend with one thing wrong: a block size not dividing a
length, segment ids or a mask of the wrong shape, a bad window... Each run is
classified:

- ``clear``: raised, and the message matches the entry's ``expect`` pattern;
- ``unclear``: raised, but with a message that does not say what is wrong
  (e.g. a shape error deep inside the kernel);
- ``silent``: returned a result: the configuration silently "works".

Entries declare what the kernel is known to do (``status``, with the
``finding`` in words when it is not ``clear``); the tests and ``kernel-harness
bad-input`` report every entry and fail on any change, so a kernel that
starts (or stops) accepting bad input is noticed.
"""

from __future__ import annotations

import dataclasses
import re

import jax

from kernel_harness.records.bad_input import BadInput
from kernel_harness.records.family import Family


@dataclasses.dataclass(frozen=True)
class BadInputResult:
    """What running one :class:`BadInput` did."""

    family: str
    entry: BadInput
    observed: str
    message: str

    @property
    def as_declared(self) -> bool:
        return self.observed == self.entry.status

    def describe(self) -> str:
        text = f"{self.family:<8} {self.entry.name:<44} {self.observed.upper():<8}"
        if self.observed != "silent":
            text += f" {self.message[:140]}"
        if self.entry.finding:
            text += f"\n           known finding: {self.entry.finding}"
        if not self.as_declared:
            text += f"\n           CHANGED: declared {self.entry.status}, observed {self.observed}"
        return text


def run_bad_input(family: str, entry: BadInput) -> BadInputResult:
    """Runs one entry and classifies what happened."""
    try:
        jax.block_until_ready(entry.call())
    except Exception as e:  # noqa: BLE001 - the exception is the result
        message = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
        observed = "clear" if re.search(entry.expect, message) else "unclear"
        return BadInputResult(family=family, entry=entry, observed=observed, message=message)
    return BadInputResult(family=family, entry=entry, observed="silent", message="")


def check_family(family: Family) -> list[BadInputResult]:
    """Runs every bad-input entry of ``family`` (none: it declares no list)."""
    entries = family.bad_inputs() if family.bad_inputs is not None else []
    return [run_bad_input(family.name, entry) for entry in entries]
