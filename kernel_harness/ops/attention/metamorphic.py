"""Builders of the attention Metamorphic hooks
(:class:`kernel_harness.records.hooks.Metamorphic`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from hypothesis import strategies as st

from kernel_harness.ops.attention.vocabulary import head_axis

Arrays = dict[str, np.ndarray]


def lane_divisors(n: int, lanes: int) -> list[int]:
    """The block sizes a kernel with ``lanes``-multiple tiles may take along length ``n``."""
    return [b for b in range(lanes, n + 1, lanes) if n % b == 0]


def lane_block_variants(case: Any, lanes: int) -> st.SearchStrategy[Any]:
    """The same case with independently redrawn blocks of a splash-style kernel (hstu,
    built on splash's forward and dkv kernels), each a ``lanes``-multiple divisor of its
    length: the forward's ``block_q``/``block_kv``/``block_kv_compute`` and the dkv
    kernel's ``block_q_dkv``/``block_kv_dkv``/``block_kv_dkv_compute``; shrinks towards the
    smallest blocks."""
    @st.composite
    def variant(draw: st.DrawFn) -> Any:
        def pick(n: int) -> int:
            return draw(st.sampled_from(lane_divisors(n, lanes)))

        bkv, bkv_dkv = pick(case.kv_len), pick(case.kv_len)
        return dataclasses.replace(
            case, block_q=pick(case.q_len), block_kv=bkv, block_kv_compute=pick(bkv),
            block_q_dkv=pick(case.q_len), block_kv_dkv=bkv_dkv,
            block_kv_dkv_compute=pick(bkv_dkv))

    return variant()


def inside(outside: Callable[[Any], Mapping[str, np.ndarray]]
           ) -> Callable[[Any], dict[str, np.ndarray]]:
    """``case -> {output: ~mask}`` for the masks of ``outside(case)``: a family's ``valid``
    (what the contract covers) from its ``may_be_nonfinite`` hook (what it does not), so
    the one fact serves both."""
    def valid(case: Any) -> dict[str, np.ndarray]:
        return {name: ~mask for name, mask in outside(case).items()}

    return valid


def zero_cotangent(inputs: Arrays, rows: np.ndarray, name: str = "do") -> Arrays:
    """``inputs`` with the cotangent zero where ``rows`` (broadcastable to it) is true: the
    contract's zero cotangent on rows outside it, so they cannot leak into dk/dv."""
    if name not in inputs:
        return inputs
    return {**inputs, name: np.where(rows, 0, inputs[name]).astype(inputs[name].dtype)}


def as_mha_hook(*, layout: str, kv: Sequence[str] = ("k", "v"),
                mha_fields: Callable[[Any], dict[str, Any]] | None = None,
                ) -> Callable[[Any, Arrays], tuple[Any, Arrays] | None]:
    """The ``as_mha`` hook of an attention case (head counts ``q_heads`` and ``kv_heads``):
    GQA/MQA as MHA, each kv head repeated for the query heads that use it
    (``mha_fields(case)``: further fields the MHA case changes)."""
    axis = head_axis(layout)

    def as_mha(case: Any, inputs: Arrays) -> tuple[Any, Arrays] | None:
        """GQA/MQA as MHA: each kv head repeated for the query heads that use it."""
        if case.q_heads == case.kv_heads:
            return None
        out = dict(inputs)
        for name in kv:
            out[name] = np.repeat(inputs[name], case.q_heads // case.kv_heads, axis=axis)
        extra = mha_fields(case) if mha_fields else {}
        return dataclasses.replace(case, kv_heads=case.q_heads, **extra), out

    return as_mha


def shard_case(case: Any, mesh: dict[str, int], *, per_row: Sequence[str] = ()) -> Any:
    """One shard's case under a ``batch``/``head`` mesh: the batch and the head counts
    (``q_heads``, and ``kv_heads`` where the case has it) divided by the mesh, the per-row
    fields ``per_row`` (one entry per batch row) cut to the shard's rows: ids and lengths are
    traced operands, so the first rows stand in for the shard's. None where the mesh does
    not divide them."""
    nb, nh = mesh.get("batch", 1), mesh.get("head", 1)
    heads = [n for n in ("q_heads", "kv_heads") if hasattr(case, n)]
    if case.batch % nb or any(getattr(case, n) % nh for n in heads):
        return None
    b = case.batch // nb
    rows = {n: getattr(case, n)[:b] for n in per_row if getattr(case, n) is not None}
    return dataclasses.replace(case, batch=b, **{n: getattr(case, n) // nh for n in heads},
                               **rows)
