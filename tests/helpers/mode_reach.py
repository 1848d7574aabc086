"""The events a derandomized ci-sized draw of a family's strategy reaches (no kernel
runs), for the per-family tests that every declared mode is drawn."""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, Phase, given, settings

from kernel_harness import get_family

#: matches-reference examples of the ci profile.
CI_EXAMPLES = 30


def events_reached(family: str, examples: int = CI_EXAMPLES) -> Counter[str]:
    """Examples per event over ``examples`` derandomized draws of ``family``'s cases."""
    fam = get_family(family)
    seen: Counter[str] = Counter()

    @settings(max_examples=examples, derandomize=True, database=None, deadline=None,
              phases=(Phase.generate,), suppress_health_check=list(HealthCheck))
    @given(case=fam.cases())
    def draw(case: object) -> None:
        seen.update(set(fam.events(case)))

    draw()
    return seen
