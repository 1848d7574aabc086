"""Block parameters as data: a family that names its block fields and their choices gets
``block-size-invariance`` without writing a hook.

``Metamorphic(block_variants=block_variants({"block_rows": (8, 16, 32)}))``: each example of
the property draws another value for every named field (a case the case type refuses, e.g.
a block that must divide a size, is not drawn) and runs the kernel on both; the outputs
must agree within twice the tolerance, without any reference.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hypothesis import assume
from hypothesis import strategies as st


def block_variants(choices: Mapping[str, Sequence[Any]]
                   ) -> Callable[[Any], st.SearchStrategy[Any]]:
    """The ``Metamorphic.block_variants`` hook of a case type whose block sizes are the
    fields ``choices`` names: ``hook(case)`` draws the case with each of those fields
    replaced by one of its choices (the same data: only the fields named change)."""
    if not choices or any(not values for values in choices.values()):
        raise ValueError(f"block_variants: give each block field some choices, got "
                         f"{dict(choices)!r}")
    fields = {name: tuple(values) for name, values in choices.items()}

    def hook(case: Any) -> st.SearchStrategy[Any]:
        missing = [f for f in fields if not hasattr(case, f)]
        if missing:
            raise ValueError(f"block_variants: {type(case).__name__} has no field(s) "
                             f"{missing}; name the case's block fields")

        @st.composite
        def variant(draw: st.DrawFn) -> Any:
            changes = {f: draw(st.sampled_from(v), label=f) for f, v in fields.items()}
            try:
                return dataclasses.replace(case, **changes)
            except ValueError:  # a combination the case type refuses: not a variant
                assume(False)
                raise  # unreachable: assume(False) raises

        return variant()

    return hook
