"""Running one op relation of a registered family (narrowed strategy, derandomized, no
shrinking) for the relation tests under tests/families/."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis.strategies import SearchStrategy

from kernel_harness import get_family, resolve_backend
from kernel_harness.checks.properties import Observer, build_property

BACKEND = resolve_backend("interpret")


def run_relation(family: str, name: str, strategy: SearchStrategy[Any], *,
                 impl: Callable[..., Any] | None = None, max_examples: int = 3) -> Observer:
    """Runs relation ``name`` of ``family`` over ``strategy``; raises what it raises."""
    fam = dataclasses.replace(get_family(family), cases=lambda: strategy)
    observer = Observer()
    prop = build_property(name, fam, backend=BACKEND, impl=impl, observer=observer)
    settings(max_examples=max_examples, deadline=None, database=None, derandomize=True,
             phases=(Phase.generate,), suppress_health_check=list(HealthCheck))(prop)()
    return observer
