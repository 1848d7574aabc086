"""The all-gather matmul op's reference: the product of the whole x and y, in float64."""

from __future__ import annotations

import numpy as np

from kernel_harness.ops.all_gather_matmul.cases import AgmmCase


def reference(case: AgmmCase, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``out`` [m, n] (float32): x @ y (y transposed back where it is given as [n, k])."""
    x = np.asarray(inputs["x"]).astype(np.float64)
    y = np.asarray(inputs["y"]).astype(np.float64)
    return {"out": (x @ (y.T if case.rhs_transpose else y)).astype(np.float32)}
