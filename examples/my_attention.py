"""A small third-party-style attention kernel, checked with kernel-harness's ``sdpa`` family.

It follows ``jax.nn.dot_product_attention``'s signature but, like many real kernels,
supports only part of it: no additive ``bias`` and no ``local_window_size``. It says
so with the ``kernel_harness_without`` attribute, so the harness never draws those
cases for it (and prints "checked without: bias, window")::

    kernel-harness check sdpa --impl examples.my_attention:attention --accept-declared --profile ci

(``--accept-declared``: the user allows the declaration; without it, or ``--without
bias,window``, the check draws biases and windows anyway: an implementation does not narrow
its own check)

``attention_undeclared`` is the same kernel without the declaration: the harness
draws biases and windows, the kernel raises, and each kind of crash is one FAIL
with a repro command.
"""

from __future__ import annotations

import jax.numpy as jnp

_MASKED = -0.7 * float(jnp.finfo(jnp.float32).max)


def attention_undeclared(query, key, value, bias=None, mask=None, *, scale=None,
                         is_causal=False, query_seq_lengths=None,
                         key_value_seq_lengths=None, local_window_size=None):
    """Softmax attention in plain jnp; (batch, len, heads, head_dim) layout, GQA by
    repeating key/value heads. Raises NotImplementedError for a bias or a window."""
    if bias is not None:
        raise NotImplementedError("my_attention: an additive bias is not supported")
    if local_window_size is not None:
        raise NotImplementedError("my_attention: local_window_size is not supported")
    b, t, n, h = query.shape
    s, k = key.shape[1], key.shape[2]
    key = jnp.repeat(key, n // k, axis=2)
    value = jnp.repeat(value, n // k, axis=2)
    scale = 1.0 / h**0.5 if scale is None else scale
    logits = jnp.einsum("btnh,bsnh->bnts", query.astype(jnp.float32),
                        key.astype(jnp.float32)) * scale
    visible = jnp.ones((b, n, t, s), bool)
    if is_causal:
        visible &= jnp.arange(s)[None, :] <= jnp.arange(t)[:, None]
    if mask is not None:
        visible &= mask
    if key_value_seq_lengths is not None:
        visible &= jnp.arange(s)[None, None, None, :] < key_value_seq_lengths[:, None, None, None]
    probs = jax_softmax(jnp.where(visible, logits, _MASKED))
    out = jnp.einsum("bnts,bsnh->btnh", probs.astype(value.dtype).astype(jnp.float32),
                     value.astype(jnp.float32))
    if query_seq_lengths is not None:
        rows = jnp.arange(t)[None, :] < query_seq_lengths[:, None]
        out = jnp.where(rows[:, :, None, None], out, 0.0)
    return out.astype(query.dtype)


def jax_softmax(x):
    """Softmax over the last axis, max-subtracted."""
    e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
    return e / jnp.sum(e, axis=-1, keepdims=True)


def attention(*args, **kwargs):
    """:func:`attention_undeclared`, declared as lacking bias and windows."""
    return attention_undeclared(*args, **kwargs)


attention.kernel_harness_without = {"bias", "window"}
