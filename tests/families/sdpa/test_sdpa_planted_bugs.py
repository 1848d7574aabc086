"""Planted bugs around jax.nn.dot_product_attention must make the sdpa family check fail
under the ci profile's property (generation only, no shrinking)."""

from __future__ import annotations

import hypothesis
import pytest

from kernel_harness import get_family, resolve_backend
from kernel_harness.checks.properties import HarnessFailure, Observer, matches_reference
from kernel_harness.run.profiles import get_profile
from tests.helpers.sdpa_mutants import SDPA_MUTANTS

FAMILY = get_family("sdpa")
BACKEND = resolve_backend("interpret")


#: Run per push (the others nightly: the same property over sdpa's other planted bugs).
PER_PUSH = ("ignores_mask", "gqa_heads_interleaved")


@pytest.mark.parametrize("name", [n if n in PER_PUSH else pytest.param(n, marks=pytest.mark.nightly)
                                  for n in sorted(SDPA_MUTANTS)])
def test_planted_bug_fails_ci_profile(name):
    observer = Observer()
    prop = matches_reference(FAMILY, backend=BACKEND, impl=SDPA_MUTANTS[name],
                             observer=observer)
    settings = hypothesis.settings(
        get_profile("ci"), phases=(hypothesis.Phase.explicit, hypothesis.Phase.generate)
    )
    with pytest.raises(HarnessFailure):
        settings(prop)()
    assert observer.examples <= 30
