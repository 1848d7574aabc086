"""Builders of the attention Metamorphic hooks (:class:`kernel_harness.spec.hooks.Metamorphic`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kernel_harness.ops.attention.vocabulary import head_axis

Arrays = dict[str, np.ndarray]


def lane_divisors(n: int, lanes: int) -> list[int]:
    """The block sizes a kernel with ``lanes``-multiple tiles may take along length ``n``."""
    return [b for b in range(lanes, n + 1, lanes) if n % b == 0]


def zero_cotangent(inputs: Arrays, rows: np.ndarray, name: str = "do") -> Arrays:
    """``inputs`` with the cotangent zero where ``rows`` (broadcastable to it) is true: the
    contract's zero cotangent on rows outside it, so they cannot leak into dk/dv."""
    if name not in inputs:
        return inputs
    return {**inputs, name: np.where(rows, 0, inputs[name]).astype(inputs[name].dtype)}


def as_mha_hook(*, layout: str, q_heads: str, kv_heads: str, kv: Sequence[str] = ("k", "v"),
                mha_fields: Callable[[Any], dict[str, Any]] | None = None,
                ) -> Callable[[Any, Arrays], tuple[Any, Arrays] | None]:
    """The ``as_mha`` hook of a case whose head counts are the fields ``q_heads`` and
    ``kv_heads``: GQA/MQA as MHA, each kv head repeated for the query heads that use it
    (``mha_fields(case)``: further fields the MHA case changes)."""
    axis = head_axis(layout)

    def as_mha(case: Any, inputs: Arrays) -> tuple[Any, Arrays] | None:
        """GQA/MQA as MHA: each kv head repeated for the query heads that use it."""
        nq, nkv = getattr(case, q_heads), getattr(case, kv_heads)
        if nq == nkv:
            return None
        out = dict(inputs)
        for name in kv:
            out[name] = np.repeat(inputs[name], nq // nkv, axis=axis)
        extra = mha_fields(case) if mha_fields else {}
        return dataclasses.replace(case, **{kv_heads: nq}, **extra), out

    return as_mha
