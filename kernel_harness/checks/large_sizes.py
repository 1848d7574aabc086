"""The ``large-sizes`` property: real examples up to the sizes a family claims
(:class:`~kernel_harness.records.claims.LargeSizes`), run in interpret mode and compared with
the reference exactly as ``matches-reference`` compares its cases (issue 55, item 5).

``claimed-sizes`` traces the implementation at the claimed sizes: it sees a different
program, not a wrong number. An implementation whose program is the same at every size but
whose answer is wrong only past the drawn sizes (a slice that drops the logits past 4096, a
pad that shifts rows past 128, a cast to bfloat16 past 6144 features, groups past 32 folded
into one, a contraction cut at 2048, a context cut into 4096-token chunks, a head_dim never
drawn) passes it. Here each example draws one case per claimed size, every size axis
log-uniformly from just past the sizes the op's ordinary strategy draws up to the claimed
extent capped by the profile's tier (``kernel_harness.run.profiles.LARGE_SIZES``; the family
says what each tier caps and why), the other fields as the op's strategy draws them; the
first example is at the caps (the simplest draw of every span is its top). Each case goes
through :func:`kernel_harness.run.runner.check_case` like a ``matches-reference`` case: the
kernel count, poisoning, the math outside, the source, the comparison with the family's
judge. A failing case raises the same :class:`HarnessFailure`, so its report and its
``reproduce:`` line (``kernel-harness repro FAMILY --case JSON``: the case replays by
itself) are a matches-reference failure's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import hypothesis
from hypothesis import given
from hypothesis import strategies as st

from kernel_harness.checks.matches_reference import HarnessFailure, Observer, judge_case
from kernel_harness.core.backends import Backend
from kernel_harness.core.errors import PropertyNotApplicable
from kernel_harness.records.claims import LargeSizes
from kernel_harness.records.family import Family
from kernel_harness.run.runner import ensure_supported

#: The tier a property built outside a profile runs (``run_property`` picks the profile's).
DEFAULT_TIER = "ci"


def large_sizes(family: Family, *, backend: Backend, impl: Callable[..., Any] | None = None,
                impl_spec: str | None = None, observer: Observer | None = None
                ) -> Callable[[], None]:
    """The property "at sizes up to the claimed ones, run for real, every output matches the
    reference" (a SKIP for a family whose claim declares no large examples). The test it
    returns runs the :data:`DEFAULT_TIER`; its ``kh_large_sizes(tier)`` switches it to
    another tier (what ``run_property`` does with the profile's budget) and returns it."""
    claim = family.claimed
    large: LargeSizes | None = None if claim is None else claim.large
    if large is None:
        raise PropertyNotApplicable(
            f"{family.name} declares no large examples (Claim.large): its claimed sizes, if "
            "any, are traced (claimed-sizes), never run")
    without = family.without
    kept = large.kept(without)
    if not kept:
        raise PropertyNotApplicable(
            f"{family.name}: every claimed size uses what this check leaves out "
            f"({', '.join(sorted(without))})")
    ensure_supported(family, backend)
    labels = [large.names[i] for i in kept]
    optional = frozenset(without & set(family.optional))

    # The tier is chosen when the run starts (``kh_large_sizes``), read at each draw: the
    # test object stays the one built here (what callers wrap, stub or decorate).
    tier = [DEFAULT_TIER]

    def cases(_: None) -> st.SearchStrategy[tuple[Any, ...]]:
        return large.strategy(tier[0], optional)

    @given(cases=st.just(None).flatmap(cases))
    def prop(cases: tuple[Any, ...]) -> None:
        _event(f"{tier[0]} tier: {large.tier(tier[0]).why}", observer)
        # One case per claimed size, in order; the first failure ends the example.
        for label, case in zip(labels, cases, strict=True):
            _event(f"large size: {label}", observer)
            result = judge_case(family, case, backend, impl, impl_spec, observer)
            if observer is not None:
                observer.record_result(result)
            if not result.passed:
                if observer is not None:
                    observer.end_example(False)
                raise HarnessFailure(result)
        if observer is not None:
            observer.end_example(True)

    def choose(name: str) -> Callable[[], None]:
        tier[0] = name
        prop.kh_examples = large.tier(name).examples  # None: the profile's count
        return prop

    prop.__name__ = f"{family.name}_large_sizes"
    prop.kh_large_sizes = choose
    # Outside run_property (mutate's child): 2 examples on ci, as the ci budget.
    prop.kh_example_fraction = 0.07
    return choose(DEFAULT_TIER)


def _event(label: str, observer: Observer | None) -> None:
    hypothesis.event(label)
    if observer is not None:
        observer.events[label] += 1
