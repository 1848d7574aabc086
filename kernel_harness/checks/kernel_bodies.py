"""Whether an implementation's kernels change between a small size and a larger one as the
family's own kernels do (issue 55, item 5; round 11 of the adversarial set).

``claimed-sizes`` traces a program at the sizes a family claims and compares what it
computes *around* its kernels with the small size; round 11 kept every wrapper the same
and chose, in plain Python from the shapes, what went *into* its kernel bodies: a gain of
0.75 past 16384 rows, ``sm_scale`` times 1.25 past 4352 keys, ``eps + 1`` past 10240
columns, the causal mask dropped past 8192 queries, the exponentials taken in bfloat16
for four-axis inputs. A kernel's body is a jaxpr too, so each kernel's body is digested
(:class:`~kernel_harness.core.compat.pallas_bodies.KernelDigest`: the primitives it runs,
with their result dtypes, and the floating literals it holds) at the small size and at each
traced one, and whatever the implementation's kernels gain or lose between the two must be
what the family's own kernels gain or lose there: a primitive (with its dtype) appearing or
disappearing, or a floating constant appearing that is neither one of the family's
kernels' constants at that size nor one of its own small-size constants scaled as a
family constant scales (``1/sqrt(head_dim)`` at another head size).

Only for an implementation given with ``--impl`` (the family's own kernel is the
baseline). An integer a kernel body compares a position with, adds, subtracts or clamps
by must be, at every size traced, an extent of what it handles there (its operands, blocks
and grid, give or take one), 0 or 1, or a number the family's kernels use there: round 11
left the last logit of a row out (``lt iota 31999``) past 8 rows of 32000, and round 12
compared program ids and iotas with constants the same at every size (rows from 8192,
heads from 16, splits from 8). The five families' own kernels use no other such number at
any size traced but gpu-decode's 32 query heads (so an --impl derived from one passes).
Not seen: other integer constants (a block count, a loop bound: they change with every
block choice, honest or not), a gate whose number happens to be an extent, or is reached
by arithmetic on one, a floating threshold on the values (the draws judge those), a
constant the same at every size in the wrapper, and a change the family's kernels also
make at that size.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from kernel_harness.checks import wrapper_standin
from kernel_harness.checks.size_programs import Traced, traced_at
from kernel_harness.core.backends import Backend
from kernel_harness.core.compat.pallas_bodies import KernelDigest
from kernel_harness.records.claims import Abstract


def _ops(digests: Sequence[KernelDigest]) -> frozenset[tuple[str, str]]:
    return frozenset().union(*(d.ops for d in digests))


def _changes(small: Sequence[KernelDigest], here: Sequence[KernelDigest]
             ) -> tuple[frozenset[tuple[str, str]], frozenset[tuple[str, str]]]:
    """What the family's kernels gain and lose between the two sizes: kernel by kernel
    where they launch as many at both (a kernel that stops using its program id while
    another keeps it), else all of them together."""
    pairs = ([(a.ops, b.ops) for a, b in zip(small, here, strict=True)]
             if len(small) == len(here) else [(_ops(small), _ops(here))])
    return (frozenset().union(*(b - a for a, b in pairs)),
            frozenset().union(*(a - b for a, b in pairs)))


#: Where one less than an extent is honest: the last index (``eq``, ``le``, ``gt``, a clamp),
#: a rounding up (``add``); a ``lt``/``ge`` mask bound is the extent itself.
_LAST = frozenset({"eq", "ne", "le", "gt", "min", "max", "add", "sub"})


def _honest(op: str, value: int, extents: frozenset[int]) -> bool:
    return value in (-1, 0, 1) or value in extents or (
        op in _LAST and value + 1 in extents) or (op in ("add", "sub") and value - 1 in extents)


def _finite(values: frozenset[float]) -> list[float]:
    return [v for v in values if math.isfinite(v) and v != 0.0]


def _scalings(small: Sequence[KernelDigest], here: Sequence[KernelDigest]) -> list[float]:
    """How the family's floating constants scale from the small size to this one: 1, and
    each ratio of a constant it holds only here to one it holds only at the small size, and
    its inverse (the family divides by a row length, an implementation multiplies by its
    reciprocal)."""
    before = frozenset().union(*(d.floats for d in small))
    after = frozenset().union(*(d.floats for d in here))
    ratios = [a / b for a in _finite(after - before) for b in _finite(before - after)]
    return [1.0, *ratios, *(1.0 / r for r in ratios)]


def _explained(value: float, own: frozenset[float], theirs: frozenset[float],
               scalings: list[float]) -> bool:
    if value in theirs or not math.isfinite(value):
        return value in theirs
    return any(math.isclose(value, v * r, rel_tol=1e-6, abs_tol=0.0)
               for v in own for r in scalings)


def _named(ops: frozenset[tuple[str, str]]) -> str:
    return ", ".join(f"{name}" + (f" ({dtype})" if dtype else "")
                     for name, dtype in sorted(ops)[:4])


def difference(mine_small: Sequence[KernelDigest], mine: Sequence[KernelDigest],
               theirs_small: Sequence[KernelDigest], theirs: Sequence[KernelDigest]
               ) -> str | None:
    """How the implementation's kernels (``mine_small`` at the small size, ``mine`` here)
    change otherwise than the family's (``theirs_small``, ``theirs``), as one clause; None
    where they change as the family's do (a kernel count that differs is the count's to
    report)."""
    if len(mine_small) != len(mine):
        return None
    gained, lost = _changes(theirs_small, theirs)
    family_floats = frozenset().union(*(d.floats for d in theirs))
    family_bounds = frozenset().union(*({v for _, v in d.bounds} | d.extents
                                         for d in theirs))
    scalings = _scalings(theirs_small, theirs)
    for j, (before, after) in enumerate(zip(mine_small, mine, strict=True)):
        new = after.ops - before.ops - gained
        if new:
            return (f"kernel {j + 1}'s body computes {_named(new)} here and not at the small "
                    "size (the family's kernels do not)")
        gone = before.ops - after.ops - lost
        if gone:
            return (f"kernel {j + 1}'s body no longer computes {_named(gone)} here (it does "
                    "at the small size; the family's kernels still do)")
        own = frozenset(_finite(before.floats))
        odd = sorted(v for v in after.floats - before.floats
                     if not _explained(v, own, family_floats, scalings))
        if odd:
            return (f"kernel {j + 1}'s body holds the constant {odd[0]!r} here, which "
                    "neither the family's kernels hold here nor its own small-size "
                    "constants become as the family's do")
        bounds = sorted((v, op) for op, v in after.bounds
                        if v not in family_bounds and not _honest(op, v, after.extents))
        if bounds:
            return (f"kernel {j + 1}'s body bounds a position by {bounds[0][0]} here "
                    f"({bounds[0][1]}), which is no extent of what it handles (its operands, "
                    "blocks and grid; one less for a last index) and no number the family's "
                    "kernels use here")
    return None


class AgainstFamily:
    """An ``--impl``'s program at each size traced, against the family's own kernel's at
    the same size and at the small one (with that size's floating dtypes): the kernels
    printed as the family's at the small size must still be the family's (round 11 passed
    ``sm_scale`` through the family's own kernel times 1.25 past 4352 keys), the wrapper
    may lose no primitive the family's keeps (a division dropped past 4096 keys), and its
    kernels' bodies change only as the family's do (:func:`difference`)."""

    def __init__(self, call: Callable[..., Any], impl: Callable[..., Any],
                 family: Callable[..., Any], small: Abstract, backend: Backend,
                 impl_small: Traced) -> None:
        self._call, self._fns, self._small, self._backend = call, (impl, family), small, backend
        self._shared = wrapper_standin.matched(
            impl_small.texts, traced_at(call, family, small, backend).texts)
        self._like: dict[str, tuple[Traced, Traced]] = {}
        self._found: dict[str, str | None] = {}

    def _small_like(self, arrays: Abstract) -> tuple[Traced, Traced]:
        """The small size with ``arrays``' floating dtypes and only the inputs ``arrays``
        has (segment ids dropped where a claimed size has none: a wrapper's work on them
        is not work it stops doing at that size)."""
        like = {n: jax.ShapeDtypeStruct(a.shape, arrays[n].dtype)
                if jnp.issubdtype(a.dtype, jnp.floating)
                and jnp.issubdtype(arrays[n].dtype, jnp.floating) else a
                for n, a in self._small.items() if n in arrays}
        key = _key(like)
        if key not in self._like:
            mine, theirs = (traced_at(self._call, f, like, self._backend) for f in self._fns)
            self._like[key] = (mine, theirs)
        return self._like[key]

    def problem(self, arrays: Abstract, mine: Traced | None = None) -> str | None:
        """How the implementation's program at ``arrays`` departs from the family's (one
        clause), None where it changes with the size as the family's does; ``mine``: the
        implementation traced there already."""
        key = _key(arrays)
        if key not in self._found:
            if mine is None:
                mine = traced_at(self._call, self._fns[0], arrays, self._backend)
            theirs = traced_at(self._call, self._fns[1], arrays, self._backend)
            mine_small, theirs_small = self._small_like(arrays)
            lost = sorted((mine_small.prims - mine.prims)
                          - (theirs_small.prims - theirs.prims))
            self._found[key] = (
                wrapper_standin.kernel_difference(mine.texts, theirs.texts, self._shared)
                or (f"it no longer computes {', '.join(lost[:4])} there (it does at the small "
                    "size, and the family's wrapper still does)" if lost else None)
                or difference(mine_small.digests, mine.digests, theirs_small.digests,
                              theirs.digests))
        return self._found[key]


def _key(arrays: Abstract) -> str:
    return " ".join(f"{n}={tuple(a.shape)}:{a.dtype}" for n, a in arrays.items())
