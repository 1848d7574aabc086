"""The MoE op's reference as embedded in an exported script: :mod:`.reference` verbatim
(one source for the family and the script), the case's fields as a namespace."""

from __future__ import annotations

import dataclasses
import textwrap

from kernel_harness.ops.moe import reference as _reference
from kernel_harness.ops.moe.cases import MoeCase
from kernel_harness.records.export import module_source

_IMPORT = "from kernel_harness.ops.moe.cases import MoeCase\n"


def reference_source(case: MoeCase) -> str:
    """Code defining ``reference(x)`` for ``case`` (:func:`~.reference.reference`)."""
    source = module_source(_reference)
    if _IMPORT not in source:
        raise ValueError("kernel_harness/ops/moe/reference.py changed its imports: update "
                         "kernel_harness/ops/moe/export.py")
    fields = {f.name: getattr(case, f.name) for f in dataclasses.fields(case)}
    fields.update(experts=case.experts, tokens=case.tokens)
    return source.replace(_IMPORT, "from typing import Any\n\nMoeCase = Any\n") + (
        textwrap.dedent(f'''

            import types

            _CASE = types.SimpleNamespace(**{fields!r})
            _op_reference = reference


            def reference(x):
                """The MoE layer in float64 (the op's reference, verbatim above)."""
                return _op_reference(_CASE, x)
        '''))
