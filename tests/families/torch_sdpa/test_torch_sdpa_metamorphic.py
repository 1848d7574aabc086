"""torch-sdpa's metamorphic hooks: each property they turn on passes torch's SDPA and fails
a planted wrapper on a small fixed case (derandomized, a few examples, no shrinking)."""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip(
    "torch", reason="torch is not importable: the torch-sdpa tests need the [torch] extra "
    "(a separate venv, docs/torch.md)")

from kernel_harness.families.torch_sdpa.cases import TorchSdpaCase  # noqa: E402
from tests.families.paged_decode.helpers import fails, passes  # noqa: E402
from tests.helpers.torch_impls import ignores_is_causal  # noqa: E402

CAUSAL = TorchSdpaCase(dtype="float32", seed=1, batch=1, q_heads=4, kv_heads=2, q_len=16,
                       kv_len=16, head_dim=16, is_causal=True, backend="math")
BOOL_MASK = dataclasses.replace(CAUSAL, is_causal=False, mask="full", mask_keep=0.5)
FLOAT_MASK = dataclasses.replace(CAUSAL, is_causal=False, bias="full")


def ignores_mask(query, key, value, attn_mask=None, *, is_causal, scale, enable_gqa):
    """SDPA with attn_mask dropped."""
    return torch.nn.functional.scaled_dot_product_attention(
        query, key, value, is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)


def tiled_kv_heads(query, key, value, attn_mask=None, *, is_causal, scale, enable_gqa):
    """GQA by tiling the kv heads (query head h reads kv head h % kv_heads) instead of
    repeating each for its group (h // group)."""
    group = query.shape[1] // key.shape[1]
    return torch.nn.functional.scaled_dot_product_attention(
        query, key.repeat(1, group, 1, 1), value.repeat(1, group, 1, 1),
        attn_mask=attn_mask, is_causal=is_causal, scale=scale)


def raw_exponent(query, key, value, attn_mask=None, *, is_causal, scale, enable_gqa):
    """Softmax without subtracting the row max: exp overflows for large logits (no mask,
    no causal, like the case it runs on)."""
    group = query.shape[1] // key.shape[1]
    key, value = key.repeat_interleave(group, 1), value.repeat_interleave(group, 1)
    s = query @ key.transpose(-1, -2) * (scale or query.shape[-1] ** -0.5)
    e = torch.exp(s)
    return (e / e.sum(-1, keepdim=True)) @ value


def test_invisible_keys_and_queries_are_ignored():
    flash = dataclasses.replace(CAUSAL, backend="flash")
    passes("torch-sdpa", "invisible-inputs-ignored", [CAUSAL, BOOL_MASK, flash],
           max_examples=6)
    fails("torch-sdpa", "invisible-inputs-ignored", [CAUSAL], ignores_is_causal,
          max_examples=4)
    fails("torch-sdpa", "invisible-inputs-ignored", [BOOL_MASK], ignores_mask, max_examples=4)


def test_options_have_their_effect():
    passes("torch-sdpa", "option-effect", [CAUSAL, BOOL_MASK, FLOAT_MASK], max_examples=3)
    fails("torch-sdpa", "option-effect", [CAUSAL], ignores_is_causal)
    fails("torch-sdpa", "option-effect", [FLOAT_MASK], ignores_mask)


def test_gqa_equals_mha_with_repeated_kv_heads():
    passes("torch-sdpa", "gqa-equals-mha", [CAUSAL, BOOL_MASK], max_examples=2)
    fails("torch-sdpa", "gqa-equals-mha", [CAUSAL], tiled_kv_heads)


def test_large_logits_stay_finite():
    large = dataclasses.replace(CAUSAL, is_causal=False, logit_scale=16.0)
    passes("torch-sdpa", "finite-out", [large], max_examples=3)
    fails("torch-sdpa", "finite-out", [large], raw_exponent, max_examples=6)
