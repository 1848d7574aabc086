"""The attention op's case vocabulary: one spelling of the shape, two array layouts.

Every attention case spells its head counts as :class:`Shape` does (``q_heads``, and
``kv_heads`` where the kernel groups heads); cases stored with the old spellings
(``heads``, ``num_q_heads``, ``num_kv_heads``) load through
:data:`kernel_harness.core.case.FIELD_ALIASES`. Each family maps its case onto
:class:`Shape`.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from kernel_harness.core.case import check_heads

#: ``bhqd``: heads before positions (``[batch, heads, len, dim]``: flash, splash);
#: ``bqhd``: positions before heads (``[batch, len, heads, dim]``: sdpa, gpu-mha, hstu).
LAYOUTS: tuple[str, ...] = ("bhqd", "bqhd")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Shape:
    """An attention problem's sizes in the op's vocabulary; a case with all six inherits
    them (``class MyCase(Shape, Case)``: :class:`~kernel_harness.ops.attention.problem.
    AttentionProblem`)."""

    batch: int
    q_heads: int
    kv_heads: int
    q_len: int
    kv_len: int
    head_dim: int

    def __post_init__(self) -> None:
        parent = getattr(super(), "__post_init__", None)
        if parent is not None:  # the case's own checks, whichever base comes first
            parent()
        check_heads(self)

    @property
    def group(self) -> int:
        """Query heads per kv head (query head ``h`` reads kv head ``h // group``)."""
        return self.q_heads // self.kv_heads

    @property
    def sharing(self) -> str:
        """``mha`` (one kv head per query head), ``gqa`` or ``mqa`` (one kv head)."""
        if self.kv_heads == self.q_heads:
            return "mha"
        return "mqa" if self.kv_heads == 1 else "gqa"


def head_axis(layout: str) -> int:
    """The head axis of q/k/v/do in ``layout``."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    return 1 if layout == "bhqd" else 2


def heads_first(x: jax.Array, layout: str) -> jax.Array:
    """``[batch, heads, q_len, ...]`` from an array in ``layout`` (and back: the swap is its
    own inverse)."""
    return x if layout == "bhqd" else jnp.swapaxes(x, 1, 2)


def query_axis(layout: str) -> int:
    """The query axis of q/do/out in ``layout``."""
    return 2 if head_axis(layout) == 1 else 1


def roles(layout: str, *, q: str = "q", k: str = "k", v: str = "v", do: str = "do",
          kv_head: str = "kv_head", **extra: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """The Metamorphic axis roles of q, k, v and do in ``layout`` (``kv_head="head"``
    for a kernel without GQA), plus ``extra`` inputs' roles as given."""
    head_axis(layout)
    rows = ("batch", "head", "query", "dim") if layout == "bhqd" else ("batch", "query", "head",
                                                                      "dim")
    keys = ("batch", kv_head, "key", "dim") if layout == "bhqd" else ("batch", "key", kv_head,
                                                                     "dim")
    return {q: rows, do: rows, k: keys, v: keys, **extra}


def output_axes(layout: str, *, kv_head: str = "kv_head", **extra: tuple[str, ...]
                ) -> dict[str, tuple[str, ...]]:
    """A family's ``output_axes`` in ``layout``: ``out`` and ``dq`` along the query rows,
    ``dk`` and ``dv`` along the keys (``kv_head="head"`` for a kernel without GQA), then
    ``extra`` outputs' axes as given (a bias gradient, residuals)."""
    axes = roles(layout, kv_head=kv_head)
    return {"out": axes["q"], "dq": axes["q"], "dk": axes["k"], "dv": axes["k"], **extra}
