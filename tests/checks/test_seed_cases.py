"""Family.seed_cases: hand-made cases every matches-reference run tries first."""

from __future__ import annotations

import dataclasses
import itertools

import hypothesis
import pytest

from kernel_harness import get_family, resolve_backend
from kernel_harness.checks.properties import HarnessFailure, Observer, matches_reference
from kernel_harness.records.narrow import narrow
from tests.helpers.toy_family import FAMILY as TOY
from tests.helpers.toy_family import ToyCase, softplus


def _wrong_at_length_3(x):
    return softplus(x) * (1.5 if x.shape[0] == 3 else 1.0)


def test_a_seed_case_the_strategy_never_draws_is_tried_first():
    seeded = dataclasses.replace(
        TOY, seed_cases=lambda without: (ToyCase(dtype="float32", seed=1, length=3),)
    )
    observer = Observer()
    prop = matches_reference(
        seeded, backend=resolve_backend("interpret"), impl=_wrong_at_length_3, observer=observer
    )
    with pytest.raises(HarnessFailure) as info:
        hypothesis.settings(max_examples=5, database=None)(prop)()
    assert info.value.result.case.length == 3
    assert observer.examples == 1  # the explicit example fails at once: nothing drawn

    # Without the seed the same impl passes: the strategy only draws lengths 4 and 8.
    clean = Observer()
    hypothesis.settings(max_examples=5, database=None)(matches_reference(
        TOY, backend=resolve_backend("interpret"), impl=_wrong_at_length_3, observer=clean
    ))()
    assert clean.examples == 5 and clean.failed == 0


def test_flash_seed_case_reaches_a_partial_batch_block():
    flash = get_family("flash")
    (case,) = flash.seed_cases(flash.without)
    assert {"partial-batch-block", "causal", "bias-full", "segments", "length-1-segment",
            "fwd-kv-subtiles"} <= set(flash.events(case))


@pytest.mark.parametrize("family_name", ["flash"])
def test_narrowed_seed_cases_do_not_use_the_features_left_out(family_name):
    family = get_family(family_name)
    names = sorted(family.optional)
    for k in range(len(names) + 1):
        for left_out in itertools.combinations(names, k):
            narrowed = narrow(family, left_out)
            for case in narrowed.seed_cases(narrowed.without):
                events = set(family.events(case))
                if "causal" in left_out:
                    assert "causal" not in events
                if "segments" in left_out:
                    assert "segments" not in events
                if "bias" in left_out:
                    assert "bias-full" not in events
                if "scale" in left_out:
                    assert case.scale is None
                if "q-len-ne-kv-len" in left_out:
                    assert case.q_len == case.kv_len
