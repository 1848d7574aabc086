"""Independent float64 numpy reference for gpu-softmax: p = exp(x - max) / sum exp(x - max)
over the last axis, from the rounded inputs."""

from __future__ import annotations

import numpy as np

from kernel_harness.ops.softmax.cases import SoftmaxCase


def softmax(x: np.ndarray) -> np.ndarray:
    """float64 softmax over the last axis."""
    x = np.asarray(x, np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def reference(case: SoftmaxCase, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``out`` as [rows, n] float32 (the adapter returns the kernel's output in that shape)."""
    return {"out": softmax(inputs["x"]).reshape(case.rows, case.n).astype(np.float32)}
