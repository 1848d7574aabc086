"""Running an op's declared relations (:class:`kernel_harness.records.relations.Relation`)
as metamorphic properties, and finding the :class:`Spec` of any metamorphic property of
a family (the built-in ones and its op's)."""

from __future__ import annotations

from collections.abc import Callable

import hypothesis
import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from kernel_harness.checks.metamorphic.machinery import ANY_FAMILY, Check, Spec, build
from kernel_harness.checks.metamorphic.relations import SPECS
from kernel_harness.records.family import Family
from kernel_harness.records.relations import Relation


def _body(relation: Relation) -> Callable[[Check, st.DataObject], None]:
    def body(check: Check, data: st.DataObject) -> None:
        variant = relation.variant(check.case, check.inputs, data.draw)
        assume(variant is not None)
        if variant.note:
            check.notes.append(variant.note)
        base = check.run()
        moved = check.run(case=variant.case, inputs=variant.inputs)
        expected = {k: np.asarray(v) for k, v in variant.expected(base).items()}
        unknown = sorted(set(expected) - set(check.family.output_axes))
        if unknown:
            raise ValueError(f"{check.family.name}: relation {relation.name} expects "
                             f"outputs the family does not produce: {unknown}")
        missing = sorted(n for n in expected if n not in moved)
        if missing:
            check.problems.append(f"the variant's run returned no {', '.join(missing)}")
            return
        compared = variant.compared

        def may_change(name: str, shape: tuple[int, ...]) -> np.ndarray:
            mask = compared.get(name)
            return np.zeros(shape, bool) if mask is None else ~np.broadcast_to(mask, shape)

        checked = check.expect_same(
            expected, moved, may_change=may_change,
            factor=0.0 if variant.exact else variant.factor,
            what=relation.doc.rstrip(".") + ("; bitwise" if variant.exact else ""),
            outputs=list(expected),
        )
        if not checked:
            hypothesis.event(f"{relation.name}: vacuous (no element compared)")

    return body


def relation_spec(relation: Relation) -> Spec:
    """The metamorphic :class:`Spec` running ``relation``: the kernel on the drawn case and
    on the relation's variant, the variant's outputs judged against what the relation
    computes from the first run's. It applies to a case the relation gives a variant
    (a narrowed family that leaves none is a SKIP saying so, not a health check)."""
    return Spec(relation.name, _body(relation), ANY_FAMILY, relation.fraction, relation.doc,
                applies=lambda _hooks, case, draw: relation.variant(
                    case, case.materialize(), draw) is not None,
                applies_what=f"gives {relation.name} a variant")


_BUILTIN = {s.name: s for s in SPECS}


def spec_for(family: Family, name: str) -> Spec | None:
    """The metamorphic property ``name`` of ``family``: a built-in one or one of its op's
    relations; None when neither."""
    if name in _BUILTIN:
        return _BUILTIN[name]
    relation = family.relation(name)
    return None if relation is None else relation_spec(relation)


def build_relation(relation: Relation) -> Callable[..., Callable[[], None]]:
    """The property builder of ``relation`` (the signature of ``matches_reference``)."""
    return build(relation_spec(relation))


def builtin_names() -> frozenset[str]:
    """Names of the built-in metamorphic properties (a relation may not take one)."""
    return frozenset(_BUILTIN)
