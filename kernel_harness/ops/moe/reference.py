"""The MoE op's reference, in float64 from the case's rounded inputs: scores of the gating
logits, each token's ``top_k`` best experts (by score; ties do not occur in the case's
data), the gated FFN of each, combined by the (optionally renormalized) scores. Written
from the op's definition, not from any kernel's reference helpers."""

from __future__ import annotations

import numpy as np

from kernel_harness.ops.moe.cases import MoeCase

#: The op's core, which a fused MoE kernel computes inside its body
#: (``KernelExpectation.forward_computes``): a kernel that only routes fails.
KERNEL_CORE = {"dot_general": "the experts' two matmuls"}

#: GPT-OSS's clipped gate (``swigluoai``): sigmoid sharpness and clip limit.
SWIGLU_ALPHA, SWIGLU_LIMIT = 1.702, 7.0


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def scores(case: MoeCase, gating: np.ndarray) -> np.ndarray:
    """Routing scores [tokens, experts]: softmax over experts, or the sigmoid of each."""
    if case.scoring == "softmax":
        z = np.exp(gating - gating.max(axis=-1, keepdims=True))
        return z / z.sum(axis=-1, keepdims=True)
    return _sigmoid(gating)


def activation(case: MoeCase, gate: np.ndarray, up: np.ndarray) -> np.ndarray:
    """The gated activation of the two projections."""
    if case.activation == "silu":
        return gate * _sigmoid(gate) * up
    if case.activation == "gelu":  # the tanh approximation
        inner = np.sqrt(2 / np.pi) * (gate + 0.044715 * gate**3)
        return 0.5 * gate * (1 + np.tanh(inner)) * up
    gate = np.minimum(gate, SWIGLU_LIMIT)
    up = np.clip(up, -SWIGLU_LIMIT, SWIGLU_LIMIT)
    return (up + 1) * gate * _sigmoid(SWIGLU_ALPHA * gate)


def routing(case: MoeCase, gating: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(experts [tokens, top_k], weights [tokens, top_k]): each token's best-scored
    experts, best first, and the scores they are combined with."""
    s = scores(case, gating)
    chosen = np.argsort(-s, axis=-1, kind="stable")[:, :case.top_k]
    weights = np.take_along_axis(s, chosen, axis=-1)
    if case.renormalize:
        weights = weights / weights.sum(axis=-1, keepdims=True)
    return chosen, weights


def reference(case: MoeCase, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``out`` [tokens, hidden] (float32)."""
    x = {k: np.asarray(v).astype(np.float64) for k, v in inputs.items()}
    chosen, weights = routing(case, x["gating"])
    out = np.zeros((case.tokens, case.hidden))
    for e in range(case.experts):
        rows, slot = np.nonzero(chosen == e)
        if not rows.size:
            continue
        gate = x["tokens"][rows] @ x["w1"][e, 0]
        up = x["tokens"][rows] @ x["w1"][e, 1]
        if case.bias:
            gate, up = gate + x["b1"][e, 0], up + x["b1"][e, 1]
        y = activation(case, gate, up) @ x["w2"][e]
        if case.bias:
            y = y + x["b2"][e]
        out[rows] += weights[rows, slot][:, None] * y
    return {"out": out.astype(np.float32)}
