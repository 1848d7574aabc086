"""flywheel-tpu's merged paged KV cache and its q rounding, in the paged op's terms: what
every flywheel family over ``[pages, page_size, 2 * kv_heads, head_dim]`` pages shares
(flywheel-tpu-paged-decode, flywheel-tpu-varlen-paged).

Token row r of a page holds K of kv head h in row 2h and V in 2h + 1 ([k0, v0, k1, v1,
...]); the library multiplies q by its fused scale (``softmax_scale * log2(e)``, or
``softmax_scale / softcap`` with a cap) in float32 and rounds it to bfloat16 before QK^T.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax.numpy as jnp
import numpy as np

from kernel_harness.core.case import Arrays
from kernel_harness.ops.paged_attention.strategy import MASKED_V


def fused_scale(softmax_scale: float, soft_cap: float | None) -> float:
    """The library's q factor: softmax_scale * log2(e), or softmax_scale / cap with a cap
    (log2(e) then rides after its tanh)."""
    return softmax_scale / soft_cap if soft_cap else softmax_scale * math.log2(math.e)


def rounded_q(q: np.ndarray, softmax_scale: float, soft_cap: float | None) -> np.ndarray:
    """float32 q as the library's logits take it: bf16(q * fused) * (scale / fused), so
    q.k is the scaled logit with exactly the kernel's rounding of q."""
    fused = fused_scale(softmax_scale, soft_cap)
    product = np.asarray(q, np.float32) * np.float32(fused)
    rounded = np.asarray(product.astype(jnp.bfloat16), np.float64)
    return (rounded * (softmax_scale / fused)).astype(np.float32)


def split(kv_cache: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float32 K and V pages [kv_heads, pages, page_size, dim] of the merged cache
    (exact: bfloat16 widened)."""
    kv = np.asarray(kv_cache, np.float32)
    k, v = (kv[:, :, i::2].transpose(2, 0, 1, 3) for i in (0, 1))
    return k, v


def merged(k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The merged cache [pages, page_size, 2 * kv_heads, dim] of K and V pages
    [kv_heads, pages, page_size, dim] (the inverse of :func:`split`)."""
    both = np.stack([k, v], axis=1)  # [kv_heads, 2, pages, page_size, dim]
    return both.reshape(2 * k.shape[0], *k.shape[1:]).transpose(1, 2, 0, 3)


def poisoned_pages(rng: np.random.Generator, shape: tuple[int, ...], seen: np.ndarray,
                   nan: bool) -> np.ndarray:
    """A merged cache of standard normal K and V pages ``shape`` [kv_heads, pages,
    page_size, dim] whose slots outside ``seen`` [pages, page_size] hold K = 0 and
    V = +-MASKED_V (a leak shows as a large error) or, with ``nan``, NaN in K and V."""
    k, v = rng.standard_normal(shape), rng.standard_normal(shape)
    if nan:
        k[:, ~seen] = v[:, ~seen] = np.nan
    else:
        k[:, ~seen] = 0.0
        v[:, ~seen] = MASKED_V * np.where(rng.random(shape) < 0.5, -1.0, 1.0)[:, ~seen]
    return merged(k, v)


def as_mha(case: Any, inputs: Arrays, name: str = "kv_cache") -> tuple[Any, Arrays] | None:
    """The case with one kv head per query head (each K/V row pair of the merged cache
    ``name`` repeated for its group), or None for MHA."""
    group = case.q_heads // case.kv_heads
    if group == 1:
        return None
    heads = np.arange(case.q_heads) // group
    rows = np.stack([2 * heads, 2 * heads + 1], axis=1).reshape(-1)
    return (dataclasses.replace(case, kv_heads=case.q_heads),
            {**inputs, name: np.take(np.asarray(inputs[name]), rows, axis=2)})


#: An exported script's lines splitting ``x["kv_cache"]`` into float32 ``k`` and ``v``
#: pages [kv_heads, pages, page_size, dim] (:func:`split`).
SPLIT_SOURCE = (
    'kv = np.asarray(jnp.asarray(x["kv_cache"], jnp.float32))  # [pages, 128, 2h, d]\n'
    "k, v = (kv[:, :, i::2].transpose(2, 0, 1, 3) for i in (0, 1))  # K: 2h, V: 2h+1")


def rounded_q_source(softmax_scale: float, soft_cap: float | None, q: str) -> str:
    """An exported script's expression of :func:`rounded_q` over the float32 ``q``."""
    fused = fused_scale(softmax_scale, soft_cap)
    return (f"jnp.asarray(jnp.asarray({q}, jnp.float32) * np.float32({fused!r}), "
            f"jnp.bfloat16).astype(jnp.float32) * {softmax_scale / fused!r}")
