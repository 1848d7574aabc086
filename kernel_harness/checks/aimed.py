"""Cases aimed at an implementation's own constants (round 12 of the adversarial set).

A kernel wrong only for values between the strategies' regimes (rows whose maximum lies in
(-1e8, -1e5), a variance past 1e6, an eps in [1e-10, 5e-8]) must test its values against
numbers, and a traced program holds those numbers as literals. As a fuzzer harvests the
operands of a program's comparisons into its dictionary, the harness traces an ``--impl``
at the family's small size (``Claim.small``, in each floating dtype the family draws) and
the family's own kernel beside it, and collects the floating literals only the
implementation holds (:func:`constants`). The family's op turns each into a few cases whose
values reach a hair past it on either side (``Family.aimed``: a softmax's logits there, a
norm's spread, its square root, its eps), which matches-reference runs first, as explicit
examples. Its failure says it was one of these.

What it cannot aim at: a threshold computed from values rather than written (``exp(11.5)``
holds 11.5), one in the implementation's Python rather than its traced program, and a
family without a claim (nothing to trace it at) or without ``aimed``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from kernel_harness.checks import wrapper_standin
from kernel_harness.core.backends import Backend
from kernel_harness.core.case import DTYPES
from kernel_harness.core.compat import pallas_bodies
from kernel_harness.records.family import Family

#: The most constants aimed at (the largest in magnitude first), and the most cases.
MAX_CONSTANTS = 6
MAX_CASES = 12
#: Numbers every program holds (a half, a doubling, a sign): not aimed at.
_PLAIN = frozenset({0.0, 0.5, 1.0, 2.0, -0.5, -1.0, -2.0})
#: How the cases' origin reads in a failure report.
ORIGIN = ("one of the cases aimed at the implementation's own constants (values just past a "
          "number its program holds and the family's does not: checks/aimed.py)")


def _literals(fn: Callable[..., Any], family: Family, backend: Backend) -> frozenset[float]:
    claim = family.claimed
    assert claim is not None
    small = claim.small()
    found: set[float] = set()
    floats = {str(a.dtype) for a in small.values() if jnp.issubdtype(a.dtype, jnp.floating)}
    for dtype in sorted(floats | (set(DTYPES) - set(family.without))):
        arrays = {n: jax.ShapeDtypeStruct(a.shape, dtype)
                  if jnp.issubdtype(a.dtype, jnp.floating) else a for n, a in small.items()}
        found |= pallas_bodies.float_literals(
            wrapper_standin.traced(claim.call, fn, arrays, backend))
    return frozenset(found)


def constants(family: Family, impl: Callable[..., Any], backend: Backend) -> list[float]:
    """The floating literals ``impl``'s traced program holds and the family's kernel's does
    not, at the family's small size in each dtype it draws, largest in magnitude first
    (at most :data:`MAX_CONSTANTS`); [] where the family claims no sizes."""
    if family.claimed is None or impl is family.kernel:
        return []
    try:
        theirs = _literals(family.kernel, family, backend)
        mine = _literals(impl, family, backend)
    except Exception:  # noqa: BLE001 - claimed-sizes traces the same small size and reports
        return []  # why it raised; nothing is aimed here then
    own = sorted((c for c in mine - theirs if c not in _PLAIN and math.isfinite(c)),
                 key=lambda c: (-abs(c), c))
    return own[:MAX_CONSTANTS]


def cases(family: Family, impl: Callable[..., Any] | None, backend: Backend) -> list[Any]:
    """The cases ``family.aimed`` makes for ``impl``'s own constants (:func:`constants`),
    at most :data:`MAX_CASES`; [] without an ``--impl`` or ``aimed``."""
    if impl is None or family.aimed is None:
        return []
    out: list[Any] = []
    for c in constants(family, impl, backend):
        out.extend(family.aimed(c, family.without))
    return out[:MAX_CASES]
