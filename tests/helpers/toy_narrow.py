"""A toy family with an optional feature ("long": length-8 cases), and implementations
that lack it, declared or not, for the capability and crash-report tests."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
from hypothesis import strategies as st

from kernel_harness.records.narrow import without
from tests.helpers.toy_family import FAMILY as TOY
from tests.helpers.toy_family import ToyCase, softplus


def _cases(without: frozenset[str] = frozenset()) -> st.SearchStrategy[ToyCase]:
    lengths = [4] if "long" in without else [4, 8]
    return st.builds(
        ToyCase, dtype=st.just("float32"), seed=st.integers(0, 2**16),
        length=st.sampled_from(lengths),
    )


FAMILY = dataclasses.replace(
    TOY, name="toyopt", cases=_cases, optional={"long": "no length-8 cases"}
)


def short_only_undeclared(x):
    """Softplus that raises on length-8 inputs (and does not say so)."""
    if x.shape[0] == 8:
        raise NotImplementedError("short_only: length 8 is not supported")
    return softplus(x)


@without("long")
def short_only(x):
    """The same kernel, declared as lacking the "long" feature."""
    return short_only_undeclared(x)


def two_crashes(x):
    """Raises one way on length 8, another way on length 4: two crash kinds."""
    if x.shape[0] == 8:
        raise NotImplementedError("two_crashes: length 8")
    return jnp.logaddexp(x, "zero")  # TypeError
