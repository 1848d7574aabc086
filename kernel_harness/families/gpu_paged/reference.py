"""Independent plain-jnp reference for gpu-paged: tokens gathered through the block tables,
visibility from the case, float32, HIGHEST."""

from __future__ import annotations

import numpy as np

from kernel_harness.core.backends import Backend
from kernel_harness.families.gpu_paged.cases import PagedCase
from kernel_harness.ops.paged_decode.reference import (
    paged_decode,
    paged_decode_low_precision,
    visible_lengths,
)


def visible(case: PagedCase) -> np.ndarray:
    """bool [batch, capacity]: token t of row b counts iff t < length_b."""
    return visible_lengths([case.length(b) for b in range(case.batch)], case.capacity)


def kv_values(case: PagedCase, inputs: dict[str, np.ndarray]) -> tuple[np.ndarray, ...]:
    """float32 K and V pages (int8 pages dequantized with their per-token scales)."""
    k = np.asarray(inputs["k_pages"], np.float32)
    v = np.asarray(inputs["v_pages"], np.float32)
    if case.quantized:
        k = k * inputs["k_scales_pages"][..., None]
        v = v * inputs["v_scales_pages"][..., None]
    return k, v


def low_precision_reference(case: PagedCase, inputs: dict[str, np.ndarray],
                            backend: Backend) -> dict[str, np.ndarray]:
    """The calibrated judge's yardstick: the same math with q, K/V and the softmax
    weights in ``case.dtype``, default matmul precision, on ``backend``'s device."""
    k, v = kv_values(case, inputs)
    return {"out": paged_decode_low_precision(
        inputs["q"], k, v, inputs["block_tables"], visible(case), case.soft_cap, case.dtype,
        backend.device)}


def reference(case: PagedCase, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """out in float32 (int8 pages dequantized with their per-token scales)."""
    k, v = kv_values(case, inputs)
    return {"out": paged_decode(inputs["q"], k, v, inputs["block_tables"], visible(case),
                                case.soft_cap)}
