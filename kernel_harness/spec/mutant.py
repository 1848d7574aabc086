"""Mutants as plain data: a planted bug is one source edit in one module.

A family's catalog (``kernel_harness/families/<name>/mutants.py``, ``MUTANTS``) is
a list of :class:`Mutant`; :mod:`kernel_harness.regression.mutate` runs them.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True, kw_only=True)
class Mutant:
    """One planted bug: replace ``old`` by ``new`` in module ``module``'s source.

    Attributes:
      name: short name (``fwd-no-rescale``).
      description: the bug in words, as a kernel author would make it.
      module: dotted module whose source is mutated.
      old: source text to replace (exact, whitespace included).
      new: its replacement.
      occurrence: which occurrence of ``old`` (1-based) when it appears more than
        once; ``None`` requires exactly one.
      tags: ``ci`` marks the fast subset CI runs.
    """

    name: str
    description: str
    module: str
    old: str
    new: str
    occurrence: int | None = None
    tags: tuple[str, ...] = ()


class StaleMutant(ValueError):
    """The mutant's source text is not where the catalog says (or is ambiguous)."""


def apply(mutant: Mutant, source: str) -> str:
    """The mutated source; :class:`StaleMutant` when ``old`` is missing or ambiguous."""
    if mutant.old == mutant.new:
        raise StaleMutant(f"{mutant.name}: old and new text are identical")
    count = source.count(mutant.old)
    if count == 0:
        raise StaleMutant(f"{mutant.name}: text not found in {mutant.module}: {mutant.old!r}")
    if mutant.occurrence is None:
        if count != 1:
            raise StaleMutant(
                f"{mutant.name}: text occurs {count} times in {mutant.module}; "
                f"set occurrence=1..{count}: {mutant.old!r}"
            )
        return source.replace(mutant.old, mutant.new)
    if not 1 <= mutant.occurrence <= count:
        raise StaleMutant(
            f"{mutant.name}: occurrence {mutant.occurrence} but the text occurs {count} times"
        )
    start = -1
    for _ in range(mutant.occurrence):
        start = source.index(mutant.old, start + 1)
    return source[:start] + mutant.new + source[start + len(mutant.old):]
