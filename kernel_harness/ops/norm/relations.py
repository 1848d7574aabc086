"""The row-norm op's relations (layer_norm and rms_norm, with their vjp).

- rows-independent: replacing one row of x and of the cotangent changes no other row of
  out or dx, bitwise (dweight and dbias sum over rows: not compared).
- scale-equivariant: ``norm(a x, eps a^2) = norm(x, eps)`` for both ops, with ``dx``
  scaled by ``1 / a`` and dweight/dbias unchanged; ``a`` a power of two, so the scaled
  inputs are exact in every dtype.
- shift-invariant (layer_norm): ``layer_norm(x + c) = layer_norm(x)``, dx and the weight
  gradients too; ``c`` per row, an integer multiple of the row's spread rounded to a power
  of two. Rounding ``x + c`` to a low precision moves x by up to half an ulp of ``|x| +
  |c|``, which the factor of the tolerance covers (c is at most 2 spreads). A constant
  row's spread is sqrt(eps) (its sqrt(var + eps)): shifted by spreads of the other rows it
  would sit thousands of its own spreads from 0, where one rounding is no longer small.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import strategies as st

from kernel_harness.core.case import Arrays, cast
from kernel_harness.ops.norm.cases import NormCase
from kernel_harness.ops.rows import one_row_perturbed
from kernel_harness.records.relations import Draw, Relation, Variant

#: Powers of two scaling x (and eps by their square).
SCALES: tuple[float, ...] = (2.0, 0.25, 8.0, 0.5)
_MAX = {"float16": 6e4, "bfloat16": 3e38, "float32": 3e38}
_TINY = {"float16": 6e-5, "bfloat16": 1e-37, "float32": 1e-37}


def rows_independent(case: NormCase, inputs: Arrays, draw: Draw) -> Variant | None:
    """One row of x and do replaced: the other rows of out and dx unchanged, bitwise."""
    return one_row_perturbed(case, inputs, draw, row_inputs=("x", "do"),
                             row_outputs=("out", "dx"), leading=case.leading)


def scale_equivariant(case: NormCase, inputs: Arrays, draw: Draw) -> Variant | None:
    """x scaled by a power of two a and eps by a^2: out, dweight, dbias unchanged, dx / a."""
    a = draw(st.sampled_from(SCALES), label="scale")
    x = np.asarray(inputs["x"], np.float64) * a
    big = np.abs(x).max()
    nonzero = np.abs(x[x != 0])
    if big > _MAX[case.dtype] or (nonzero.size and nonzero.min() < _TINY[case.dtype]):
        return None  # scaled past the dtype's normal range: not exact
    scaled = dataclasses.replace(case, eps=case.eps * a * a)
    return Variant(
        case=scaled, inputs={**inputs, "x": cast(x, case.dtype)},
        expected=lambda base: {"out": base["out"], "dx": np.asarray(base["dx"]) / a,
                               "dweight": base["dweight"], "dbias": base["dbias"]},
        note=f"x scaled by {a:g}, eps by {a * a:g} (eps {scaled.eps:g})")


def shift_invariant(case: NormCase, inputs: Arrays, draw: Draw) -> Variant | None:
    """layer_norm only: each row shifted by its own constant; every output unchanged."""
    if case.op != "layer_norm":
        return None
    k = [draw(st.sampled_from((1, -2, 2, -1)), label=f"shift of row {r}")
         for r in range(min(case.rows, 3))]
    spread = np.where(case.constant_mask().reshape(-1), np.sqrt(case.eps), case.spread)
    unit = 2.0 ** np.round(np.log2(spread))
    shift = np.array([k[r % len(k)] for r in range(case.rows)], np.float64) * unit
    x = np.asarray(inputs["x"], np.float64) + shift.reshape(*case.leading, 1)
    if np.abs(x).max() > _MAX[case.dtype]:
        return None
    return Variant(case=case, inputs={**inputs, "x": cast(x, case.dtype)},
                   expected=lambda base: {k: base[k] for k in ("out", "dx", "dweight", "dbias")},
                   note=f"rows shifted by {sorted(set(shift.tolist()))}")


RELATIONS: tuple[Relation, ...] = (
    Relation(name="rows-independent", doc="Replacing one row of x and do changes no other "
             "row of out or dx.", variant=rows_independent, fraction=0.15),
    Relation(name="scale-equivariant", doc="Scaling x by a power of two a and eps by a^2 "
             "leaves out, dweight and dbias unchanged and divides dx by a.",
             variant=scale_equivariant, fraction=0.15),
    Relation(name="shift-invariant", doc="Shifting a row of x by a constant leaves "
             "layer_norm's out, dx, dweight and dbias unchanged.", variant=shift_invariant,
             fraction=0.15),
)
