"""Planted bugs for the SDPA family: wrappers around ``jax.nn.dot_product_attention``
that each get one option or one detail wrong. Each must make the family check fail."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from kernel_harness.families.sdpa.kernel import xla_sdpa


def ignores_local_window(query, key, value, bias=None, mask=None, **opts):
    return xla_sdpa(query, key, value, bias, mask, **{**opts, "local_window_size": None})


def ignores_kv_lengths(query, key, value, bias=None, mask=None, **opts):
    return xla_sdpa(query, key, value, bias, mask, **{**opts, "key_value_seq_lengths": None})


def ignores_q_lengths(query, key, value, bias=None, mask=None, **opts):
    return xla_sdpa(query, key, value, bias, mask, **{**opts, "query_seq_lengths": None})


def ignores_mask(query, key, value, bias=None, mask=None, **opts):
    return xla_sdpa(query, key, value, bias, None, **opts)


def bias_before_scale(query, key, value, bias=None, mask=None, **opts):
    """(q.k + bias) * scale instead of q.k * scale + bias."""
    scale = opts["scale"] or 1.0 / math.sqrt(query.shape[-1])
    return xla_sdpa(query, key, value, None if bias is None else bias * scale, mask, **opts)


def gqa_heads_interleaved(query, key, value, bias=None, mask=None, **opts):
    """Query head n reads kv head n % K instead of n // (N / K)."""
    group = query.shape[2] // key.shape[2]
    key, value = (jnp.tile(t, (1, 1, group, 1)) for t in (key, value))
    return xla_sdpa(query, key, value, bias, mask, **opts)


def causal_bottom_right(query, key, value, bias=None, mask=None, **opts):
    """Causal aligned to the last key (decoding style) instead of top-left."""
    if not opts["is_causal"]:
        return xla_sdpa(query, key, value, bias, mask, **opts)
    t, s = query.shape[1], key.shape[1]
    causal = (jnp.arange(s)[None, :] <= jnp.arange(t)[:, None] + (s - t))[None, None]
    mask = causal if mask is None else mask & causal
    return xla_sdpa(query, key, value, bias, mask, **{**opts, "is_causal": False})


def bias_gradient_dropped(query, key, value, bias=None, mask=None, **opts):
    bias = None if bias is None else jax.lax.stop_gradient(bias)
    return xla_sdpa(query, key, value, bias, mask, **opts)


def pv_in_bf16(query, key, value, bias=None, mask=None, **opts):
    """Values secretly rounded to bf16 before the PV product."""
    return xla_sdpa(query, key, value.astype(jnp.bfloat16).astype(value.dtype), bias, mask,
                    **opts)


SDPA_MUTANTS: dict[str, Callable[..., Any]] = {
    f.__name__: f for f in (
        ignores_local_window, ignores_kv_lengths, ignores_q_lengths, ignores_mask,
        bias_before_scale, gqa_heads_interleaved, causal_bottom_right, bias_gradient_dropped,
        pv_in_bf16,
    )
}
