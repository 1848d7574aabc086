"""Independent plain-jnp reference for gpu-paged: tokens gathered through the block tables,
visibility from the case, float32, HIGHEST."""

from __future__ import annotations

import numpy as np

from kernel_harness.families.gpu_paged.cases import PagedCase
from kernel_harness.ops.paged_decode.reference import paged_decode, visible_lengths


def visible(case: PagedCase) -> np.ndarray:
    """bool [batch, capacity]: token t of row b counts iff t < length_b."""
    return visible_lengths([case.length(b) for b in range(case.batch)], case.capacity)


def reference(case: PagedCase, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """out in float32 (int8 pages dequantized with their per-token scales)."""
    k = np.asarray(inputs["k_pages"], np.float32)
    v = np.asarray(inputs["v_pages"], np.float32)
    if case.quantized:
        k = k * inputs["k_scales_pages"][..., None]
        v = v * inputs["v_scales_pages"][..., None]
    return {"out": paged_decode(inputs["q"], k, v, inputs["block_tables"], visible(case),
                                case.soft_cap)}
