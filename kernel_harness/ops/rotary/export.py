"""The rotary op's reference as embedded in an exported script: the definition's
tables and the rotation, verbatim (one source for the family and the script)."""

from __future__ import annotations

import inspect
import textwrap

from kernel_harness.ops.rotary import reference as _reference
from kernel_harness.ops.rotary.cases import RotaryCase


def reference_source(case: RotaryCase, *, gradients: bool) -> str:
    """Code defining ``reference(x) -> {out[, dx]}`` for ``case``: :func:`~.reference.
    rotary` at the script's ``positions`` with the case's pairing, rotary_dim and base."""
    functions = (_reference.rotary_tables, _reference.rotate, _reference.rotary)
    dout = 'x["dout"]' if gradients else "None"
    return "\n\n".join([
        f"PAIRINGS = {_reference.PAIRINGS!r}",
        *(inspect.getsource(f) for f in functions),
        textwrap.dedent(f'''
            def reference(x):
                """The rotation by the definition's float64 angles at the tokens' positions."""
                return rotary(x["x"], {dout}, x["positions"], pairing={case.pairing!r},
                              rotary_dim={case.rotary_dim!r}, base={case.base!r})
        ''')])
