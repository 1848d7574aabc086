"""The paged-decode op's metamorphic relations, written once over a family's
:class:`~kernel_harness.ops.paged_attention.layout.PagedLayout`.

- ``page-permutation``: moving every physical page elsewhere and renaming the page table
  to match changes nothing, bitwise (the same values meet in the same order);
- ``unseen-slots-ignored``: fresh values in cache slots no row sees (past its length,
  pages no row uses) change nothing, bitwise;
- ``compute-block-invariance``: another number of pages per compute block (or another
  block knob) gives the same outputs within twice the tolerance.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from hypothesis import strategies as st

from kernel_harness.core.case import Arrays
from kernel_harness.ops.paged_attention.layout import PagedLayout
from kernel_harness.records.relations import Draw, Relation, Variant


def _same(base: Arrays) -> Arrays:
    return base


def page_permutation(layout: PagedLayout) -> Relation:
    """The ``page-permutation`` relation of ``layout``."""

    def variant(case: Any, inputs: Arrays, draw: Draw) -> Variant:
        seed = draw(st.integers(0, 2**16), label="page permutation seed")
        sigma = np.random.default_rng(seed).permutation(layout.page_count(inputs))
        return Variant(case=case, inputs=layout.permuted(inputs, sigma), expected=_same,
                       exact=True, note=f"physical pages permuted (seed {seed}), table renamed")

    return Relation(name="page-permutation", variant=variant, fraction=0.15,
                    doc="Permuting the physical pages together with the page table changes "
                    "no output.")


def unseen_slots_ignored(layout: PagedLayout) -> Relation:
    """The ``unseen-slots-ignored`` relation of ``layout``."""

    def variant(case: Any, inputs: Arrays, draw: Draw) -> Variant | None:
        where = np.asarray(layout.unseen(case, inputs), bool)
        if not where.any():
            return None  # every slot is seen: nothing to perturb
        seed = draw(st.integers(0, 2**16), label="refill seed")
        moved = layout.refilled(inputs, where, np.random.default_rng(seed))
        return Variant(case=case, inputs=moved, expected=_same, exact=True,
                       note=f"{int(where.sum())} unseen cache slot(s) refilled (seed {seed})")

    return Relation(name="unseen-slots-ignored", variant=variant, fraction=0.15,
                    doc="Fresh values in cache slots no row sees (past its length, pages no "
                    "row uses) change no output.")


def compute_block_invariance(layout: PagedLayout, variants: Callable[[Any], Sequence[Any]],
                             ) -> Relation:
    """The ``compute-block-invariance`` relation: ``variants(case)`` lists the valid cases
    differing from ``case`` only in block knobs (pages per compute block...); their inputs
    are materialized anew (the poisoned slots depend on the blocks) and must agree with
    the case's in every slot some row sees."""

    def variant(case: Any, inputs: Arrays, draw: Draw) -> Variant | None:
        others = list(variants(case))
        if not others:
            return None
        other = draw(st.sampled_from(others), label="block variant")
        theirs = other.materialize()
        seen = ~np.asarray(layout.unseen(case, inputs), bool)
        for name in set(inputs) - set(layout.pages):
            if not np.array_equal(inputs[name], theirs.get(name), equal_nan=True):
                raise ValueError(f"compute-block-invariance: the variant's {name!r} differs; "
                                 "the variants must change block knobs only")
        for name, axis in layout.pages.items():
            if name in inputs and not np.array_equal(
                    np.moveaxis(np.asarray(inputs[name]), (axis, axis + 1), (0, 1))[seen],
                    np.moveaxis(np.asarray(theirs[name]), (axis, axis + 1), (0, 1))[seen]):
                raise ValueError(f"compute-block-invariance: the variant's {name!r} differs "
                                 "in seen slots; the variants must change block knobs only")
        return Variant(case=other, inputs=theirs, expected=_same, factor=2.0,
                       note=f"block variant: {other!r}")

    return Relation(name="compute-block-invariance", variant=variant, fraction=0.15,
                    doc="Another number of pages per compute block gives the same outputs "
                    "(within twice the tolerance).")


__all__ = ["compute_block_invariance", "page_permutation", "unseen_slots_ignored"]
