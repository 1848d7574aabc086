"""Implementations that raise on some options, for the crash-report tests (issue 25).

``refuses_causal`` wraps the toy attention kernel of :mod:`tests.helpers.planted_kernels`
and raises NotImplementedError when ``causal`` is on (a missing feature, the way a
third-party kernel refuses what it does not support); the other cases it computes right.
"""

from __future__ import annotations

from tests.helpers.planted_kernels import tiny_attention


def refuses_causal(q, k, v, q_seg, kv_seg, *, block_q, causal, interpret):
    """toy attention without the causal mask: raises NotImplementedError on causal."""
    if causal:
        raise NotImplementedError("refuses_causal: causal masking is not implemented")
    return tiny_attention(q, k, v, q_seg, kv_seg, block_q=block_q, causal=False,
                          interpret=interpret)
