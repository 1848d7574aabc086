"""Relations shared by row-wise ops (softmax, norms): perturbing one row of the input
changes no bit of any other row's outputs."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from hypothesis import strategies as st

from kernel_harness.core.case import Arrays, cast
from kernel_harness.records.relations import Draw, Variant


def one_row_perturbed(case: object, inputs: Arrays, draw: Draw, *, row_inputs: Sequence[str],
                      row_outputs: Sequence[str], leading: tuple[int, ...],
                      out_leading: tuple[int, ...] | None = None) -> Variant | None:
    """A variant with one row of every input in ``row_inputs`` (arrays [*leading, n])
    replaced by fresh values of the same scale; every other row of the outputs in
    ``row_outputs`` (arrays [*out_leading, ...], ``leading`` by default, the same rows in
    C order) must stay bitwise the same. None for a
    single-row case (nothing to compare)."""
    rows = int(np.prod(leading, dtype=np.int64))
    if rows < 2:
        return None
    i = draw(st.integers(0, rows - 1), label="perturbed row")
    salt = draw(st.integers(0, 2**16), label="perturbation seed")
    rng = np.random.default_rng(salt)
    moved = dict(inputs)
    for name in row_inputs:
        x = np.asarray(inputs[name])
        flat = x.reshape(rows, -1).astype(np.float64)
        finite = flat[np.isfinite(flat)]
        scale = float(np.abs(finite).max()) if finite.size else 1.0
        flat[i] = rng.standard_normal(flat.shape[1]) * (scale or 1.0) * 0.5
        moved[name] = cast(flat.reshape(x.shape), str(x.dtype))
    keep = (np.arange(rows) != i).reshape(*(out_leading or leading), 1)
    return Variant(case=case, inputs=moved,
                   expected=lambda base: {k: base[k] for k in row_outputs},
                   compared=dict.fromkeys(row_outputs, keep), exact=True,
                   note=f"row {i} (flat index) of {', '.join(row_inputs)} replaced by fresh "
                   f"values (seed {salt})")
