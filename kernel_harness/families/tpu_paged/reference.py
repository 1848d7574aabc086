"""Independent plain-jnp reference for tpu-paged: each row's tokens gathered through its
page table (numpy indices built from the case), visibility ``t < length`` from the case,
softmax attention in float32 at Precision.HIGHEST.

K/V are first brought to the values the kernel's contract computes with (see the family
CONTRACT): int8 pages dequantized as ``w * scale / 127.5``; float pages rounded to
bfloat16 (round to nearest even), exactly as the kernel converts every loaded K/V block.
Nothing else is rounded: q, the logits, the softmax and the sums stay float32, so a
kernel that rounds any of those shows.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from kernel_harness.core.backends import Backend
from kernel_harness.families.tpu_paged.cases import INT8_DIVISOR, TpuPagedCase
from kernel_harness.ops.paged_decode.reference import (
    paged_decode,
    paged_decode_low_precision,
    visible_lengths,
)


def visible(case: TpuPagedCase) -> np.ndarray:
    """bool [batch, capacity]: token t of row b counts iff t < lengths[b]."""
    return visible_lengths(case.lengths, case.capacity)


def kv_values(case: TpuPagedCase, inputs: dict[str, np.ndarray]) -> tuple[np.ndarray, ...]:
    """float32 K and V pages as the contract computes with them (see the module doc)."""
    if case.quantized:
        k = inputs["k_pages"].astype(np.float64) * inputs["k_scales"] / INT8_DIVISOR
        v = inputs["v_pages"].astype(np.float64) * inputs["v_scales"] / INT8_DIVISOR
        return k.astype(np.float32), v.astype(np.float32)
    return tuple(
        np.asarray(inputs[n], np.float32).astype(jnp.bfloat16).astype(np.float32)
        for n in ("k_pages", "v_pages")
    )


def reference(case: TpuPagedCase, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """out [batch, q_heads, head_dim] in float32."""
    k, v = kv_values(case, inputs)
    return {"out": paged_decode(inputs["q"], k, v, inputs["page_indices"], visible(case),
                                case.soft_cap)}


def low_precision_reference(case: TpuPagedCase, inputs: dict[str, np.ndarray],
                            backend: Backend) -> dict[str, np.ndarray]:
    """The calibrated judge's yardstick: the same math with q, the contract's K/V and the
    softmax weights in ``case.dtype``, default matmul precision, on ``backend``'s device."""
    k, v = kv_values(case, inputs)
    return {"out": paged_decode_low_precision(
        inputs["q"], k, v, inputs["page_indices"], visible(case), case.soft_cap, case.dtype,
        backend.device)}
