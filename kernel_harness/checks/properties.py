"""Properties written once over the family registry; pytest and the CLI both run them.

A property is a plain Hypothesis test function built for one family, one
backend and one implementation. :class:`Observer` records what the examples
reached (events), how many ran, and the last failing result, so the CLI can
print a summary table and the failure detail.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import hypothesis

from kernel_harness.checks import aimed, metamorphic
from kernel_harness.checks.claimed_sizes import claimed_sizes
from kernel_harness.checks.draws import check_draws_per_compile
from kernel_harness.checks.large_sizes import large_sizes
from kernel_harness.checks.lowering import lowers_for_tpu
from kernel_harness.checks.matches_reference import HarnessFailure, Observer, matches_reference
from kernel_harness.checks.metamorphic.op_relations import build_relation
from kernel_harness.checks.modes import Cover, ModesNotReached, start_with_cover
from kernel_harness.checks.shrinking import ShrinkReport, bounded_shrinking
from kernel_harness.core.backends import Backend
from kernel_harness.core.errors import PropertyNotApplicable
from kernel_harness.records.family import Family
from kernel_harness.run.profiles import ShrinkBudget
from kernel_harness.run.profiles import large_sizes as large_size_budget


@dataclasses.dataclass(frozen=True, kw_only=True)
class PropertyOutcome:
    """What running one property under a profile produced."""

    family: str
    prop: str
    backend: Backend
    observer: Observer
    error: BaseException | None
    wall_seconds: float
    shrink: ShrinkReport | None = None
    #: The examples run first to reach the family's modes (:mod:`.modes`), or None.
    cover: Cover | None = None
    modes_declared: int = 0

    @property
    def passed(self) -> bool:
        return self.error is None


def run_property(
    name: str,
    family: Family,
    prop: Callable[[], None],
    *,
    backend: Backend,
    observer: Observer,
    profile: hypothesis.settings,
    max_examples: int | None = None,
    seed: int | None = None,
    shrink_budget: ShrinkBudget | None = None,
    on_first_failure: Callable[[str], None] | None = None,
    all_bugs: bool = False,
    modes_first: bool = False,
    require_modes: bool = False,
) -> PropertyOutcome:
    """Runs a property outside pytest and captures (never swallows) its failure.

    The first failing example's summary and replay lines go to ``on_first_failure`` at
    once; shrinking then stops when ``shrink_budget`` runs out (None: Hypothesis's own
    limits). The outcome's ``shrink`` says which happened. ``all_bugs`` keeps drawing
    after the first failure to find every distinct failure and crash kind (the profiles
    stop at the first: ``report_multiple_bugs=False``). ``modes_first``: a property that
    takes them (``kh_example``: matches-reference) first runs a small set of examples that
    reach every mode the family declares (:mod:`.modes`), within half its examples, then
    searches with the rest; ``require_modes``: a declared mode not reached is an error."""
    overrides: dict[str, Any] = {}
    budgeted = getattr(prop, "kh_large_sizes", None)
    if budgeted is not None:  # large-sizes: the profile's examples at its tier's caps
        budget = large_size_budget(profile)
        prop = budgeted(budget.tier)
        overrides["max_examples"] = getattr(prop, "kh_examples", None) or budget.examples
    if max_examples is not None:
        overrides["max_examples"] = max_examples
    elif budgeted is None and hasattr(prop, "kh_example_fraction"):  # metamorphic: fewer
        overrides["max_examples"] = metamorphic.example_cap(prop, profile.max_examples)
    cover = None
    if modes_first:
        prop, overrides["max_examples"], cover = start_with_cover(
            prop, family, max_examples=overrides.get("max_examples", profile.max_examples),
            run_seed=seed)
    if seed is not None:
        overrides["derandomize"] = False
    if all_bugs:
        overrides["report_multiple_bugs"] = True
    test = hypothesis.settings(profile, **overrides)(prop)
    if seed is not None:
        test = hypothesis.seed(seed)(test)
    restore, shrink = bounded_shrinking(
        test, budget=shrink_budget, label=f"{family.name} {name}",
        on_first_failure=on_first_failure,
        draws_in_test=getattr(prop, "kh_draws_in_test", False),
    )
    start = time.perf_counter()
    error: BaseException | None = None
    try:
        test()
    except Exception as e:  # noqa: BLE001 - every failure is reported, none hidden
        stop = stop_request_within(e)
        if stop is not None:
            raise stop from None
        error = e
    finally:
        restore()
    if shrink.explicit:
        args = shrink.explicit_arguments or {}
        case = args.get("case", (args.get("cases") or (None,))[0])
        if cover is not None and any(case == c for c in cover.cases):
            shrink.explicit_origin = ("one of the modes-first cover's cases (drawn by the "
                                      "family's strategy to reach a mode, then run first)")
        elif any(case == c for c in getattr(prop, "kh_aimed", ())):
            shrink.explicit_origin = aimed.ORIGIN
    if error is None and require_modes and cover is not None and cover.missing:
        error = ModesNotReached(cover.line(family.name, len(family.modes)))
    return PropertyOutcome(
        family=family.name,
        prop=name,
        backend=backend,
        observer=observer,
        error=error,
        wall_seconds=time.perf_counter() - start,
        shrink=shrink,
        cover=cover,
        modes_declared=len(family.modes),
    )


def stop_request_within(error: BaseException) -> BaseException | None:
    """A request to stop the run (a ``BaseException`` that is not an ``Exception``, a
    ``SystemExit`` or a ``GeneratorExit``: ``KeyboardInterrupt``, a signal's interrupt) that
    ``error`` wraps, or None. Hypothesis catches one that lands while it draws data and
    raises ``FlakyStrategyDefinition`` from it: that is an interrupted search, not a
    failure of the kernel."""
    seen: set[int] = set()
    todo: list[BaseException] = [error]
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if not isinstance(e, (Exception, SystemExit, GeneratorExit)):
            return e
        todo += [x for x in (e.__cause__, e.__context__) if x is not None]
        todo += list(getattr(e, "exceptions", ()))
    return None


#: Property name -> builder ``(family, *, backend, impl, impl_spec, observer) -> test``:
#: the one place the properties are assembled.
PROPERTIES: dict[str, Callable[..., Callable[[], None]]] = {
    "matches-reference": matches_reference,
    **metamorphic.PROPERTIES,
    "lowers-for-tpu": lowers_for_tpu,
    "claimed-sizes": claimed_sizes,
    "large-sizes": large_sizes,
}

#: The properties that judge several data draws per compiled program
#: (``draws_per_compile``). The metamorphic relations compile their own variants and
#: draw their own perturbations per example, and lowering runs no data at all: they
#: judge one draw per example (their ``checks`` equal their ``examples``).
DRAWS_PER_COMPILE_PROPERTIES: frozenset[str] = frozenset({"matches-reference"})


def properties_of(family: Family) -> tuple[str, ...]:
    """Every property ``family`` has, in order: the built-in ones (:data:`PROPERTIES`;
    those it lacks hooks for report SKIP) then its op's relations."""
    clash = [r.name for r in family.relations if r.name in PROPERTIES]
    if clash:
        raise ValueError(f"{family.name}: relation names {clash} are built-in properties")
    return (*PROPERTIES, *(r.name for r in family.relations))


def is_property(name: str, families: list[Family] | tuple[Family, ...]) -> bool:
    """Whether ``name`` is a built-in property or a relation of one of ``families``."""
    return name in PROPERTIES or any(f.relation(name) is not None for f in families)


def build_property(name: str, family: Family, *, backend: Backend,
                   impl: Callable[..., Any] | None = None, impl_spec: str | None = None,
                   observer: Observer | None = None, draws_per_compile: int = 1
                   ) -> Callable[[], None]:
    """Builds property ``name`` for ``family`` (:data:`PROPERTIES`), handing
    ``draws_per_compile`` to the properties that take it
    (:data:`DRAWS_PER_COMPILE_PROPERTIES`); raises PropertyNotApplicable as the builders do,
    and when ``name`` is neither a built-in property nor one of the family's relations."""
    if name not in PROPERTIES:
        relation = family.relation(name)
        if relation is None:
            raise PropertyNotApplicable(
                f"{name} is a relation of another op; {family.name}'s relations: "
                f"{', '.join(r.name for r in family.relations) or 'none'}")
        return build_relation(relation)(family, backend=backend, impl=impl,
                                        impl_spec=impl_spec, observer=observer)
    extra: dict[str, Any] = {}
    if name in DRAWS_PER_COMPILE_PROPERTIES:
        extra["draws_per_compile"] = check_draws_per_compile(draws_per_compile)
    return PROPERTIES[name](family, backend=backend, impl=impl, impl_spec=impl_spec,
                            observer=observer, **extra)


__all__ = ["DRAWS_PER_COMPILE_PROPERTIES", "PROPERTIES", "HarnessFailure", "Observer",
           "PropertyOutcome", "build_property", "is_property", "properties_of", "run_property"]
