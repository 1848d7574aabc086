"""Independent float64 numpy reference for the softmax op: p = exp(x - max) / sum exp(x -
max) over the last axis, from the rounded inputs; and its low-precision twin for the
calibrated judge."""

from __future__ import annotations

from typing import Any

import numpy as np

from kernel_harness.core.case import cast
from kernel_harness.ops.softmax.cases import SoftmaxCase

#: The op's core, which a softmax kernel computes inside its body
#: (``KernelExpectation.forward_computes``): a kernel that only copies fails.
KERNEL_CORE = {"exp|exp2": "the exponentials of the shifted logits",
               "reduce_sum": "each row's sum of exponentials (the normalizer)"}


def softmax(x: np.ndarray) -> np.ndarray:
    """float64 softmax over the last axis."""
    x = np.asarray(x, np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def reference(case: SoftmaxCase, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``out`` as [rows, n] float32 (the adapter returns the kernel's output in that shape)."""
    return {"out": softmax(inputs["x"]).reshape(case.rows, case.n).astype(np.float32)}


def low_precision_reference(case: SoftmaxCase, inputs: dict[str, np.ndarray],
                            backend: Any = None) -> dict[str, np.ndarray]:
    """The softmax as a low-precision kernel can honestly compute it: ``x - max`` rounded
    to the case's dtype (the subtraction in the input dtype), exp, sum and division exact
    (float64: a float32 accumulator's error is far below the dtype's), the probabilities
    rounded once to the dtype. A kernel erring more than a small multiple of this rounds
    somewhere it need not (a denominator accumulated in the dtype, say). ``backend`` is
    unused: the twin is numpy."""
    x = np.asarray(inputs["x"], np.float64)
    diff = cast(x - x.max(axis=-1, keepdims=True), case.dtype).astype(np.float64)
    e = np.exp(diff)
    p = cast(e / e.sum(axis=-1, keepdims=True), case.dtype).astype(np.float32)
    return {"out": p.reshape(case.rows, case.n)}
