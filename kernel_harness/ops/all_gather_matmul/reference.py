"""The all-gather matmul op's reference: the product of the whole x and y, in float64."""

from __future__ import annotations

import numpy as np

from kernel_harness.ops.all_gather_matmul.cases import AgmmCase

#: The op's core, which an all-gather matmul kernel computes inside its body
#: (``KernelExpectation.forward_computes``): a kernel that only gathers fails.
KERNEL_CORE = {"dot_general": "the product of the gathered x and y"}


def product(x: np.ndarray, y: np.ndarray, rhs_transpose: bool) -> np.ndarray:
    """float32 ``x @ y`` computed in float64 (``y`` given as ``[n, k]`` where
    ``rhs_transpose``)."""
    x, y = np.asarray(x).astype(np.float64), np.asarray(y).astype(np.float64)
    return (x @ (y.T if rhs_transpose else y)).astype(np.float32)


def reference(case: AgmmCase, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``out`` [m, n] (float32): x @ y (y transposed back where it is given as [n, k])."""
    return {"out": product(inputs["x"], inputs["y"], case.rhs_transpose)}
