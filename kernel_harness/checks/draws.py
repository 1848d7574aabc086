"""Several data draws per compiled program (``draws_per_compile``).

Most of a check's time is compiling the kernel's forward+vjp program and the reference for
one static configuration; running them is cheaper (milliseconds in most families, but up
to seconds a draw for flash's larger interpret-mode cases: docs/speed.md). So each drawn
case is judged together with ``K - 1`` more cases of the same static configuration (equal
``static_key()``): other data seeds, logit scales, any data-only field, as the family's
``Family.data_draws`` hook draws them (default: other seeds). Each draw is a full case,
with its own case JSON and repro command, so a failure replays exactly the failing draw;
the draws are part of the Hypothesis example, so shrinking works on them too.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import strategies as st

from kernel_harness.records.family import Family

#: The seed range of every family's strategy.
SEEDS = st.integers(0, 2**31 - 1)


def check_draws_per_compile(k: int) -> int:
    """``k`` if it is a whole number >= 1, else a clear ValueError."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"draws_per_compile must be a whole number >= 1, got {k!r}")
    return k


def _reseeded(case: Any, seed: int) -> Any:
    return dataclasses.replace(case, seed=seed)


def data_variants(family: Family, case: Any) -> st.SearchStrategy[Any]:
    """Cases sharing ``case``'s compiled programs: ``family.data_draws(case)``, or other
    seeds. A variant whose ``static_key()`` differs is a ValueError naming the family (its
    hook is wrong: the draw would compile a program of its own)."""
    if family.data_draws is not None:
        strategy = family.data_draws(case)
    else:
        strategy = SEEDS.map(lambda seed: _reseeded(case, seed))

    def same_program(variant: Any) -> Any:
        if variant.static_key() != case.static_key():
            raise ValueError(
                f"{family.name}: data_draws drew a case of another static configuration "
                f"({variant.to_json()} vs {case.to_json()}); it may only change data fields")
        return variant

    return strategy.map(same_program)


def checked_cases(family: Family, k: int) -> st.SearchStrategy[tuple[Any, ...]]:
    """Tuples of ``k`` cases: one drawn by the family's strategy, then ``k - 1`` data
    variants of it (:func:`data_variants`)."""
    check_draws_per_compile(k)

    @st.composite
    def draws(draw: st.DrawFn) -> tuple[Any, ...]:
        case = draw(family.cases())
        variants = data_variants(family, case)
        return (case, *(draw(variants) for _ in range(k - 1)))

    return draws()


__all__ = ["SEEDS", "check_draws_per_compile", "checked_cases", "data_variants"]
