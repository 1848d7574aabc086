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

import jax.numpy as jnp
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
        line = differing(name, a, b, "changed", "change")
        if line:
            found.append(line)
    return tuple(found)


def bitwise_same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise agreement of two arrays of one shape, NaN equal to NaN (bfloat16 too,
    whose numpy kind is "V", not "f")."""
    if jnp.issubdtype(a.dtype, jnp.inexact):
        return (a == b) | (np.isnan(a) & np.isnan(b))
    return np.asarray(a == b)


def differing(name: str, a: np.ndarray, b: np.ndarray, verb: str, noun: str,
              where: np.ndarray | None = None) -> str | None:
    """``name: 12 of 4096 element(s) <verb> (bitwise), largest |<noun>| 0.0031`` where ``a``
    and ``b`` (of one shape) differ among the elements ``where`` selects (all by default);
    None where they agree."""
    same = bitwise_same(a, b) if where is None else bitwise_same(a, b) | ~where
    if np.all(same):
        return None
    diff = np.where(same, 0.0, np.abs(a.astype(np.float64) - b.astype(np.float64)))
    largest = float(np.nanmax(diff)) if np.isfinite(diff).any() else float("nan")
    return (f"{name}: {int((~same).sum())} of {a.size} element(s) {verb} (bitwise), "
            f"largest |{noun}| {largest:.3g}")


def problem_text(changed: Iterable[str]) -> str:
    """The failure's words: what changed when the same compiled program ran again."""
    return ("running the same compiled program again on the same inputs changed "
            + "; ".join(changed) + " (the family declares its kernel deterministic: "
            "Family.nondeterministic is empty)")
