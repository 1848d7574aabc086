"""torch SDPA wrappers for the ``torch-sdpa`` family's tests (``--impl`` targets).

``xla_flash_defaults``: seed 000's kernel choice as a torch user meets it: torch_xla's
``flash_attention(q, k, v)`` defaults to ``causal=False, sm_scale=1.0`` while the SDPA branch
it replaces is causal and scaled by 1/sqrt(head_dim); this wrapper keeps SDPA's math but
takes those defaults, so the family must fail it. torch is imported on the first call.
"""

from __future__ import annotations


def xla_flash_defaults(query, key, value, attn_mask=None, *, is_causal, scale, enable_gqa):
    """SDPA with ``is_causal`` and ``scale`` ignored: causal=False, sm_scale=1.0."""
    import torch  # noqa: PLC0415

    del is_causal, scale
    return torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attn_mask, is_causal=False, scale=1.0,
        enable_gqa=enable_gqa)


def sdpa_no_gqa_flag(query, key, value, attn_mask=None, *, is_causal, scale, enable_gqa):
    """A correct wrapper that expands the kv heads itself (repeat_interleave) instead of
    passing ``enable_gqa``: it must pass."""
    import torch  # noqa: PLC0415

    group = query.shape[1] // key.shape[1]
    if enable_gqa:
        key, value = key.repeat_interleave(group, 1), value.repeat_interleave(group, 1)
    return torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attn_mask, is_causal=is_causal, scale=scale)


def ignores_is_causal(query, key, value, attn_mask=None, *, is_causal, scale, enable_gqa):
    """SDPA with ``is_causal`` dropped (the scale kept): only causal cases can catch it."""
    import torch  # noqa: PLC0415

    del is_causal
    return torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attn_mask, scale=scale, enable_gqa=enable_gqa)
