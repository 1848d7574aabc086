"""The bitwise rerun inside matches-reference (issue 55, item 7): the first example of each
compiled program runs that program a second time on the same inputs, and every output
must come back bit for bit (NaN as NaN), where the family does not declare its kernel
nondeterministic (``Family.nondeterministic``).

The ``deterministic`` property does the same, but only when it runs: a gate's usual
``--property matches-reference`` run passed a kernel whose result depends on the run (a
race, an unordered accumulation, a stale buffer). A second run of a compiled program costs
its execution only (no trace, no compile), once per static configuration.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

#: The failure class, as reports and events name it.
NONDETERMINISTIC = "nondeterministic"


def changes(first: Mapping[str, Any], second: Mapping[str, Any], names: Iterable[str]
            ) -> tuple[str, ...]:
    """One line per output of ``names`` that ``second`` does not reproduce bit for bit:
    ``out: 12 of 4096 element(s) changed (bitwise), largest |change| 0.0031``."""
    found = []
    for name in names:
        a, b = first.get(name), second.get(name)
        if a is None or b is None:
            continue
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            found.append(f"{name}: shape {a.shape} then {b.shape}")
            continue
        same = (a == b) | (np.isnan(a) & np.isnan(b)) if a.dtype.kind == "f" else a == b
        if not np.all(same):
            diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
            diff = np.where(same, 0.0, diff)
            largest = float(np.nanmax(diff)) if np.isfinite(diff).any() else float("nan")
            found.append(f"{name}: {int((~same).sum())} of {a.size} element(s) changed "
                         f"(bitwise), largest |change| {largest:.3g}")
    return tuple(found)


def problem_text(changed: Iterable[str]) -> str:
    """The failure's words: what changed when the same compiled program ran again."""
    return ("running the same compiled program again on the same inputs changed "
            + "; ".join(changed) + " (the family declares its kernel deterministic: "
            "Family.nondeterministic is empty)")
