"""The sdpa family's case: the attention problem (:class:`~kernel_harness.ops.attention.
problem.AttentionProblem`) as ``jax.nn.dot_product_attention`` takes it.

``query`` is ``(batch, q_len, q_heads, head_dim)``, key/value ``(batch, kv_len, kv_heads,
head_dim)``; the bias and the boolean mask in any broadcast shape; a row that sees no key
(and is not a padding row) is outside the contract (jax.nn returns the mean of v there).
"""

from __future__ import annotations

import dataclasses

from kernel_harness.ops.attention.features import Features
from kernel_harness.ops.attention.problem import AttentionProblem


@dataclasses.dataclass(frozen=True, kw_only=True)
class SdpaCase(AttentionProblem):
    """One call of ``jax.nn.dot_product_attention`` and its vjp: the attention problem,
    every optional feature of it, nothing of its own."""

    FEATURES = Features(
        layout="bqhd",
        names={"q": "query", "k": "key", "v": "value", "do": "do", "bias": "bias",
               "mask": "mask", "q_lengths": "q_lengths", "kv_lengths": "kv_lengths"},
        # dS = P (dP - D) cancels: at 16x logits a float32 row's dq is ~1e-5 of its terms,
        # and XLA's float32 rounding of them is not the reference's.
        magnitudes=("dq", "dk", "dbias"),
        calibrated=frozenset({"bfloat16"}),
    )
