"""What the Pallas kernels of a traced program hold in their bodies, read from the jaxpr
(the walk itself is :mod:`.pallas_count`'s): each kernel printed without its name, source
place or ``interpret`` setting (:func:`kernel_text`), digested (:class:`KernelDigest`: the
primitives with their result dtypes, the floating constants, the integers that bound a
position, the extents it handles), and every floating literal a program holds
(:func:`float_literals`). For ``claimed-sizes``' comparison of an implementation's kernels
with the family's across sizes, and for the cases aimed at its own constants."""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

from kernel_harness.core.compat.pallas_count import (
    equations,
    kernel_equations,
    sub_jaxprs,
)

#: Params of a kernel's equation that name or place it rather than say what it computes,
#: and ``interpret`` (the one meant to differ between backends).
_UNNAMED = re.compile(r"^\s*(interpret|name|name_and_src_info|metadata|debug)=.*$",
                      re.MULTILINE)
#: An object's address in a printed param (two traces of one kernel hold other objects).
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")
#: Where an integer literal bounds a position: compared with, or added to, clamped by.
_BOUNDING = frozenset({"lt", "le", "gt", "ge", "eq", "ne", "add", "sub", "min", "max"})


def kernel_text(eqn: Any) -> str:
    """What a kernel equation computes, printed: its params and body (literals included),
    each block's index map, without its name, source place or ``interpret`` setting; two
    launches of the same kernel on the same shapes print the same."""
    text = _ADDRESS.sub("0x?", _UNNAMED.sub("", repr(eqn)))
    mapping = eqn.params.get("grid_mapping")
    for block in getattr(mapping, "block_mappings", ()):
        text += f"\nindex map: {getattr(block, 'index_map_jaxpr', None)}"
    return text


def kernel_texts(jaxpr: Any) -> list[str]:
    """:func:`kernel_text` of every kernel ``jaxpr`` launches, in program order."""
    return [kernel_text(eqn) for eqn in kernel_equations(jaxpr)]


@dataclasses.dataclass(frozen=True)
class KernelDigest:
    """What one kernel's body is made of, beyond its shapes.

    Attributes:
      ops: ``(primitive, result dtypes)`` of every equation of the body (its ``cond``,
        loops and scoped regions included), as a set.
      floats: the floating literals the body holds (a scale, an epsilon, a gain).
      bounds: ``(primitive, value)`` of each integer literal it compares with, adds,
        subtracts or clamps by (a mask's bound, an offset).
      extents: every axis extent of every value and block it handles, and its grid's.
    """

    ops: frozenset[tuple[str, str]]
    floats: frozenset[float]
    bounds: frozenset[tuple[str, int]] = frozenset()
    extents: frozenset[int] = frozenset()


def _extents(aval: Any) -> tuple[int, ...]:
    shape = getattr(aval, "shape", None)
    if shape is None:
        shape = getattr(getattr(aval, "inner_aval", None), "shape", ())
    return tuple(d for d in shape if isinstance(d, int))


def _scalar_literal(v: Any) -> Any:
    value = getattr(v, "val", None) if type(v).__name__ == "Literal" else None
    return value if value is not None and getattr(value, "ndim", 0) == 0 else None


def _kind(value: Any) -> str:
    return str(getattr(value, "dtype", type(value).__name__))


def kernel_digest(eqn: Any) -> KernelDigest:
    """:class:`KernelDigest` of one kernel equation."""
    ops: set[tuple[str, str]] = set()
    floats: set[float] = set()
    bounds: set[tuple[str, int]] = set()
    extents: set[int] = set()

    def inside(body: Any) -> None:
        for v in (*getattr(getattr(body, "jaxpr", body), "invars", ()),
                  *getattr(getattr(body, "jaxpr", body), "constvars", ())):
            extents.update(_extents(v.aval))
        for e in equations(body):
            ops.add((e.primitive.name,
                     ",".join(str(getattr(v.aval, "dtype", "")) for v in e.outvars)))
            for v in (*e.invars, *e.outvars):
                extents.update(_extents(getattr(v, "aval", None)))
            for v in e.invars:
                value = _scalar_literal(v)
                if value is None:
                    continue
                if _kind(value).startswith(("float", "bfloat")):
                    floats.add(float(value))
                elif e.primitive.name in _BOUNDING and _kind(value).startswith(("int", "uint")):
                    bounds.add((e.primitive.name, int(value)))
            for sub in sub_jaxprs(e):
                inside(sub)

    for body in sub_jaxprs(eqn):
        inside(body)
    for v in (*eqn.invars, *eqn.outvars):
        extents.update(_extents(v.aval))
    grid = getattr(eqn.params.get("grid_mapping"), "grid", ())
    extents.update(g for g in grid if isinstance(g, int))
    return KernelDigest(frozenset(ops), frozenset(floats), frozenset(bounds),
                        frozenset(extents))


def kernel_digests(jaxpr: Any) -> list[KernelDigest]:
    """:func:`kernel_digest` of every kernel ``jaxpr`` launches, in program order."""
    return [kernel_digest(eqn) for eqn in kernel_equations(jaxpr)]


def float_literals(jaxpr: Any) -> frozenset[float]:
    """Every finite floating literal of ``jaxpr``, its sub-jaxprs and its kernels' bodies
    included (what a program compares its values with, scales them by)."""

    found: set[float] = set()

    def walk(j: Any) -> None:
        for e in equations(j):
            for v in e.invars:
                value = _scalar_literal(v)
                if value is not None and _kind(value).startswith(("float", "bfloat")) and (
                        math.isfinite(float(value))):
                    found.add(float(value))
            for sub in sub_jaxprs(e):
                walk(sub)


    walk(jaxpr)
    return frozenset(found)
