"""Running one op relation (or built-in metamorphic property) of a paged family on fixed
cases, with a planted bug or the pristine kernel."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

from kernel_harness import get_family, resolve_backend
from kernel_harness.checks.metamorphic import MetamorphicFailure
from kernel_harness.checks.properties import Observer, build_property

BACKEND = resolve_backend("interpret")


def run_property(family_name, prop, cases, impl=None, max_examples=2):
    """The property on ``cases`` (sampled in order, derandomized); its observer."""
    family = dataclasses.replace(get_family(family_name), cases=lambda: st.sampled_from(cases),
                                 seed_cases=lambda without: ())
    observer = Observer()
    test = build_property(prop, family, backend=BACKEND, impl=impl, observer=observer)
    settings(max_examples=max_examples, deadline=None, database=None, derandomize=True,
             phases=(Phase.generate,), suppress_health_check=list(HealthCheck))(test)()
    return observer


def passes(family_name, prop, cases, max_examples=2, impl=None):
    """The pristine kernel (or ``impl``) passes ``prop`` on ``cases`` (and something was
    compared)."""
    observer = run_property(family_name, prop, cases, impl=impl, max_examples=max_examples)
    assert observer.examples >= 1 and observer.failed == 0


def fails(family_name, prop, cases, impl, max_examples=2):
    """``impl`` fails ``prop`` on ``cases``; the report's text."""
    with pytest.raises(MetamorphicFailure) as info:
        run_property(family_name, prop, cases, impl=impl, max_examples=max_examples)
    assert f"FAIL {family_name} {prop}" in str(info.value)
    return str(info.value)

