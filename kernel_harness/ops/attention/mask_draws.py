"""Drawing masks in the attention op's mask language (:mod:`.masks`): leaves whose
parameters favour block edges and their off-by-one neighbours, a computable leaf (a
kernel's in-kernel mask-function path), a seeded numpy mask (partial mask blocks) or two
leaves joined by ``&``/``|``, and the rule that keeps a drawn mask well posed
(:func:`acceptable`). Probabilities come from :func:`chance` coins, whose rates hold in the
first few dozen examples (unlike the middle of an integer range or ``sampled_from`` past
its first element); everything shrinks towards its first option.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import strategies as st

from kernel_harness.ops.attention.masks import COMPUTABLE_KINDS, NUMPY_KINDS, visible_keys


def chance(draw: st.DrawFn, p: float) -> bool:
    """True with probability ~p; shrinks to False."""
    return draw(st.integers(0, 99)) >= round(100 * (1 - p))


def pick(draw: st.DrawFn, weighted: tuple[tuple[str, int], ...]) -> str:
    """One option by integer weight (summing to 100); shrinks to the first option.

    Built from :func:`chance` coins (whose rates hold in the first few dozen examples,
    unlike the middle of an integer range or ``sampled_from`` past its first element)."""
    remaining = sum(w for _, w in weighted)
    for option, weight in reversed(weighted[1:]):
        if chance(draw, weight / remaining):
            return option
        remaining -= weight
    return weighted[0][0]


def weighted(draw: st.DrawFn, choices: tuple[tuple[Any, int], ...]) -> Any:
    """One of ``choices`` (``(value, weight)`` pairs) with probability ~ weight; shrinks
    towards the first value."""
    x = draw(st.integers(0, sum(w for _, w in choices) - 1))
    for value, w in choices:
        if x < w:
            return value
        x -= w
    raise AssertionError("unreachable")


def leaf_spec(draw: st.DrawFn, kind: str, q_len: int, kv_len: int, safe: bool) -> str:
    """One leaf mask string; parameters favour block edges and off-by-one neighbours.

    ``safe``: keep every query row seeing at least one key, and rows seeing a single
    key a minority (a diagonal-only mask has identically zero dq and dk).
    """
    ints = st.integers
    if kind == "full":
        return "full"
    if kind == "causal":
        offsets = [0, max(kv_len - q_len, 0), 1, 127, 128, 129] + ([] if safe else [-1, -128])
        off = draw(st.sampled_from(offsets) | ints(0 if safe else -q_len // 2, kv_len))
        return f"causal(offset={off})"
    if kind == "local":
        edges = [0, 1, 127, 128, 129, 255, 256]
        left = draw(st.sampled_from([*edges, None]) | ints(0, kv_len))
        right = draw(st.sampled_from([0, None, *edges[1:]]) | ints(0, kv_len))
        if left is None and right is None:
            right = 0
        if left == 0 and right == 0:
            left = 1
        off = draw(st.sampled_from([0, kv_len - q_len, 1, -1]) | ints(-64, 64))
        if safe:  # first row's window must reach key 0, last row's key kv_len - 1
            if left is not None and right is not None and left + right < q_len - kv_len:
                left = q_len - kv_len - right
            lo = -math.inf if right is None else -right
            hi = math.inf if left is None else kv_len - q_len + left
            off = int(min(max(off, lo), hi))
        return f"local(left={left}, right={right}, offset={off})"
    if kind == "chunked":
        chunk = draw(st.sampled_from([128, 64, 127, 129, 256, 2]) | ints(2, q_len))
        if safe and (q_len - 1) // chunk * chunk > kv_len - 1:
            chunk = q_len
        return f"chunked(chunk={chunk})"
    if kind == "random":
        density = draw(st.sampled_from([0.5, 0.15, 0.9]))
        return f"random(seed={draw(ints(0, 999))}, density={density})"
    if kind == "boxes":
        return f"boxes(seed={draw(ints(0, 999))}, count={draw(ints(1, 6))})"
    raise ValueError(kind)


def computable_kind(draw: st.DrawFn, kinds: list[str]) -> str:
    """causal, local or chunked; local (the most edges) the most often."""
    weights = {"causal": 30, "local": 50, "chunked": 20}
    picked = pick(draw, tuple((k, weights[k]) for k in ("causal", "local", "chunked")))
    return picked if picked in kinds else kinds[0]


def mask_spec(draw: st.DrawFn, kinds: tuple[str, ...], q_len: int, kv_len: int,
               safe: bool, computable_only: bool = False) -> str:
    """A mask string: full, one computable leaf (the kernel's mask-function path), a
    numpy mask (partial mask blocks), or ``&``/``|`` of two leaves."""
    computable = [k for k in kinds if k in COMPUTABLE_KINDS]
    arrays = [k for k in kinds if k in NUMPY_KINDS]
    shape = pick(draw, (("computable", 48), ("full", 8), ("numpy", 24), ("combo", 20)))
    if shape == "full" and "full" in kinds:
        return "full"
    if shape == "computable" and computable:
        return leaf_spec(draw, computable_kind(draw, computable), q_len, kv_len, safe)
    if shape in ("numpy", "combo") and computable_only:  # single computable leaves only
        shape = "computable"
    if shape == "computable" and computable:
        return leaf_spec(draw, computable_kind(draw, computable), q_len, kv_len, safe)
    if shape == "numpy" and (arrays or computable):
        if computable and (not arrays or draw(st.booleans())):
            leaf = leaf_spec(draw, computable_kind(draw, computable), q_len, kv_len, safe)
            return f"numpy({leaf})"
        return leaf_spec(draw, draw(st.sampled_from(arrays)), q_len, kv_len, safe)
    non_full = [k for k in kinds if k != "full"] or list(kinds)
    op = "|" if chance(draw, 0.35) else "&"
    # An intersection keeps rows non-empty more often when one side is structured.
    if op == "&" and computable:
        a = leaf_spec(draw, computable_kind(draw, computable), q_len, kv_len, safe)
    else:
        a = leaf_spec(draw, draw(st.sampled_from(non_full)), q_len, kv_len, safe)
    b = leaf_spec(draw, draw(st.sampled_from(non_full)), q_len, kv_len, safe)
    return f"{a} {op} {b}"


def key_counts(masks: tuple[str, ...], q_len: int, kv_len: int,
                q_segs: Any = None, kv_segs: Any = None) -> np.ndarray:
    return visible_keys((masks, q_len, kv_len, q_segs, kv_segs)).sum(axis=-1)


def acceptable(counts: np.ndarray, sinks: bool, max_empty: float) -> bool:
    """Whether per-row visible-key ``counts`` make a well-posed case: no row sees
    nothing unless there are sinks (then at most ``max_empty`` of them), and at
    least half the rows see two keys or more (else dq and dk are nearly zero)."""
    empty = float((counts == 0).mean())
    ok_empty = empty <= max_empty if sinks else empty == 0
    return ok_empty and float((counts >= 2).mean()) >= 0.5
