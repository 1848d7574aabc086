"""Which families a family-parametrised test runs per push; the others run nightly.

A test that repeats one harness path for every built-in family (drawing, lowering, exporting,
walking the properties) tests the family's declarations more than the harness. Per push it
runs for one family of each kind of path; nightly (``pytest -m nightly``) for every family.
Each family's own kernel still runs per push in its golden cases (docs/ci.md, "What CI leaves
to the nightly")."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pytest

#: One family of each kind: jnp attention (sdpa), a TPU attention kernel with mask objects
#: (splash), paged and ragged decode (tpu-paged, tpu-ragged-paged), a grouped matmul
#: (megablox-gmm), a row-wise op (gpu-softmax), a collective (tpu-all-gather), a delta-rule
#: recurrence (gdn2-pallas), and the second stack's libraries (flywheel-tpu-flash,
#: deltanet-tpu-gdn2).
ONE_OF_EACH_KIND = frozenset({
    "sdpa", "splash", "tpu-paged", "tpu-ragged-paged", "megablox-gmm", "gpu-softmax",
    "tpu-all-gather", "gdn2-pallas", "flywheel-tpu-flash", "deltanet-tpu-gdn2",
})


def per_push(values: Iterable[Any], *, family: Callable[[Any], str] = lambda v: v,
             ids: Callable[[Any], str] | None = None) -> list[Any]:
    """``values`` as parameters, those whose family (``family(value)``) is not in
    :data:`ONE_OF_EACH_KIND` marked nightly. Tuples stay tuples of arguments."""
    params = []
    for value in values:
        args = value if isinstance(value, tuple) else (value,)
        marks = () if family(value) in ONE_OF_EACH_KIND else (pytest.mark.nightly,)
        params.append(pytest.param(*args, marks=marks, id=ids(value) if ids else None))
    return params
