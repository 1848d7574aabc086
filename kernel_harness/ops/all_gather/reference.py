"""The all-gather op's reference: every device holds the whole input, in order."""

from __future__ import annotations

import numpy as np

from kernel_harness.ops.all_gather.cases import AllGatherCase


def gathered(x: np.ndarray, devices: int) -> np.ndarray:
    """float32 ``[devices, *x.shape]``: every device's copy is the whole ``x``."""
    x = np.asarray(x).astype(np.float32)
    return np.broadcast_to(x, (devices, *x.shape)).copy()


def reference(case: AllGatherCase, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``gathered`` [total_devices, devices * shard_rows, cols] (float32): the copy of
    every device of the mesh (in mesh order) is x."""
    return {"gathered": gathered(inputs["x"], case.total_devices)}
