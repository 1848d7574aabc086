"""The softmax op's relations: rows are independent (bitwise), and shifting a row's
logits by a constant leaves its probabilities unchanged.

Shift invariance with rounding: ``x + c`` rounded to the dtype is ``x + c + d`` with a
small known ``d`` per element, and ``softmax(x + c + d) = p e^d / sum(p e^d)`` exactly, for
``p = softmax(x)``; so the expected probabilities are computed from the first run's ``p``
and the exact ``d`` (float64), and the relation stays exact maths in every dtype.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from kernel_harness.core.case import Arrays, cast
from kernel_harness.ops.rows import one_row_perturbed
from kernel_harness.ops.softmax.cases import SoftmaxCase
from kernel_harness.records.relations import Draw, Relation, Variant

#: Shifts, as multiples of the case's logit scale, plus absolute ones that push every
#: exp past float32's range unless the max is subtracted.
SHIFTS: tuple[float, ...] = (1.0, -3.0, 0.5, 100.0, -1000.0)
#: float16 overflows at 65504.
_F16_MAX = 6e4


def rows_independent(case: SoftmaxCase, inputs: Arrays, draw: Draw) -> Variant | None:
    """One row of x replaced: every other row of out unchanged, bitwise."""
    return one_row_perturbed(case, inputs, draw, row_inputs=("x",), row_outputs=("out",),
                             leading=case.leading or (1,), out_leading=(case.rows,))


def shift_invariant(case: SoftmaxCase, inputs: Arrays, draw: Draw) -> Variant | None:
    """Each row shifted by its own constant; out is renormalized p e^d (d: the rounding
    of the shifted logits, known exactly)."""
    x = np.asarray(inputs["x"]).reshape(case.rows, case.n).astype(np.float64)
    picks = [draw(st.sampled_from(SHIFTS), label=f"shift of row {r}")
             for r in range(min(case.rows, 4))]
    shift = np.array([picks[r % len(picks)] for r in range(case.rows)])
    shift = np.where(np.abs(shift) >= 100, shift, shift * case.scale)[:, None]
    exact = x + shift
    if case.dtype == "float16" and np.abs(exact).max() > _F16_MAX:
        return None
    moved = cast(exact, case.dtype).astype(np.float64)
    # Every finite lane carries its rounding, a finite mask sentinel's too: a row whose
    # logits sit at the sentinel's level (-1e9) gives the masked lanes probability, and a
    # sentinel is shifted like the logits (an additive mask is part of them). -inf has none.
    d = np.zeros_like(exact)
    finite = np.isfinite(exact)
    d[finite] = moved[finite] - exact[finite]

    def expected(base: Arrays) -> Arrays:
        p = np.asarray(base["out"], np.float64)
        # exp(d - max d) over the lanes with probability keeps the factor finite (a
        # sentinel at finfo.min rounds by up to its spacing, 2e31: its p is 0); the
        # normalization cancels it.
        seen = p > 0
        top = np.where(seen, d, -np.inf).max(axis=-1, keepdims=True)
        top = np.where(np.isfinite(top), top, 0.0)  # a row without probability keeps p
        w = np.where(seen, p * np.exp(np.where(seen, d - top, 0.0)), 0.0)
        total = w.sum(axis=-1, keepdims=True)
        return {"out": np.where(total > 0, w / np.where(total > 0, total, 1), p)}

    return Variant(
        case=case, inputs={"x": moved.reshape(*case.leading, case.n).astype(inputs["x"].dtype)},
        expected=expected, factor=2.0,
        note=f"row shifts {sorted(set(shift[:, 0].tolist()))[:4]} (max |rounding| "
        f"{float(np.abs(d).max()):.3g})")


RELATIONS: tuple[Relation, ...] = (
    Relation(name="rows-independent", doc="Replacing one row of x changes no other row of "
             "the softmax.", variant=rows_independent, fraction=0.15),
    Relation(name="shift-invariant", doc="Shifting a row of logits by a constant leaves its "
             "probabilities unchanged (up to the known rounding of the shifted logits).",
             variant=shift_invariant, fraction=0.15),
)
