"""The hook types a family fills in to opt into the metamorphic properties,
lowering and sharding (:class:`Metamorphic`, :class:`Toggle`), and the canonical
axis roles they use.

Canonical axis roles (``Metamorphic.roles``): ``batch``, ``head`` (query
heads), ``kv_head``, ``query`` (query positions), ``key`` (key/value
positions); any other name (``dim``) is ignored. Query head ``h`` uses kv head
``h // (heads // kv_heads)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from hypothesis.strategies import SearchStrategy

from kernel_harness.core.backends import Backend
from kernel_harness.core.case import Arrays

ROLES: tuple[str, ...] = ("batch", "head", "kv_head", "query", "key")
ROW_ROLES = ("batch", "head", "query")
KEY_ROLES = ("batch", "kv_head", "key")
KEY_ROLES_BY_QHEAD = ("batch", "head", "key")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Toggle:
    """An option turned off: ``case`` is the same case without it.

    ``changes``: ``visibility`` when the option changes which keys a query sees
    (causal, window, segments: rows whose visibility differs must change, the
    others must not), ``values`` when it changes logits (soft cap: some valid
    row must change).
    """

    name: str
    case: Any
    changes: str = "visibility"

    def __post_init__(self) -> None:
        if self.changes not in ("visibility", "values"):
            raise ValueError(f"Toggle.changes must be visibility or values, got {self.changes!r}")


#: ``(name, on, fields turning it off)``, or with ``changes`` last: one option of a case.
Option = tuple[str, Any, Mapping[str, Any]] | tuple[str, Any, Mapping[str, Any], str]


def toggles(case: Any, *options: Option) -> list[Toggle]:
    """A :class:`Toggle` for each option ``case`` turns on (``on`` true): the case with
    that option's fields replaced, in the order given."""
    return [Toggle(name=o[0], case=dataclasses.replace(case, **o[2]), changes=o[3] if len(o) > 3
                   else "visibility") for o in options if o[1]]


def _no_toggles(case: Any) -> Sequence[Toggle]:
    return ()


def _no_exclusions(case: Any) -> Mapping[str, np.ndarray]:
    return {}


def _unchanged(case: Any, inputs: Arrays) -> Arrays:
    return inputs


@dataclasses.dataclass(frozen=True, kw_only=True)
class Metamorphic:
    """A family's hooks for the metamorphic properties (all built from the case
    description, never from the kernel's own mask objects).

    Attributes:
      roles: axis roles of every input and output array the properties touch
        (outputs default to ``Family.output_axes``), e.g.
        ``{"q": ("batch", "head", "query", "dim"), "k": ("batch", "kv_head", "key", "dim")}``.
        Floating inputs with a ``query`` axis (q, do) are query-side, those
        with a ``key`` axis (k, v) key-side; others are never perturbed.
      visible: ``visible(case)`` -> bool ``[batch, head, query, key]`` (size-1
        axes broadcast): which keys each query sees (mask, window, segments); None for
        an op without queries and keys (a norm, a matmul: then only ``deterministic``,
        ``finite-out`` and the op's own relations apply).
      segments: ``segments(case)`` -> ``(q_ids [batch|1, q], kv_ids [batch|1, kv])``
        or None when the case has no segments; no hook: the family has no segments.
      block_variants: ``block_variants(case)`` -> strategy of cases differing
        from ``case`` only in block sizes (same inputs).
      option_toggles: ``option_toggles(case)`` -> :class:`Toggle` s, one per
        option the case turns on.
      as_mha: ``as_mha(case, inputs)`` -> ``(case, inputs)`` of the same problem
        with kv heads repeated to one per query head, or None if not grouped.
      logit_input: the input whose scaling scales the logits (finite-out).
      may_be_nonfinite: ``{output: bool mask}`` of elements the family's
        contract lets be non-finite (e.g. lse of a row that sees no key): the
        exclusion's second use (``Family.valid`` says which).
      constrain: re-imposes input invariants of the contract after a
        perturbation (e.g. a zero cotangent on rows that see no key): its third.
      traceable: ``traceable(impl, case, backend)`` -> a jax-traceable function
        ``f(inputs) -> outputs`` (dicts of arrays, forward and gradients), for
        TPU lowering and sharded runs; ``impl`` None means the family kernel.
      local_case: ``local_case(case, {"batch": nb, "head": nh})`` -> the case one
        shard computes when batch and heads (query and kv heads alike) are split
        into ``nb`` and ``nh`` contiguous parts, or None if that split is not
        supported; see :mod:`kernel_harness.checks.sharding`.
      invisible_inexact: why ``invisible-inputs-ignored`` may not demand bitwise
        equality for this family; empty (the default): it demands it.
      tpu_device_kind: the TPU (a jax ``device_kind``, e.g. ``"TPU v6 lite"``) that
        ``lowers-for-tpu`` lowers for, for a kernel whose Mosaic lowering asks the chip
        generation; None: lowered for no particular chip.
    """

    roles: Mapping[str, tuple[str | None, ...]]
    visible: Callable[[Any], np.ndarray] | None = None
    segments: Callable[[Any], tuple[np.ndarray, np.ndarray] | None] | None = None
    block_variants: Callable[[Any], SearchStrategy[Any]] | None = None
    option_toggles: Callable[[Any], Sequence[Toggle]] = _no_toggles
    as_mha: Callable[[Any, Arrays], tuple[Any, Arrays] | None] | None = None
    logit_input: str = "q"
    may_be_nonfinite: Callable[[Any], Mapping[str, np.ndarray]] = _no_exclusions
    constrain: Callable[[Any, Arrays], Arrays] = _unchanged
    traceable: Callable[[Any, Any, Backend], Callable[[Arrays], Arrays]] | None = None
    local_case: Callable[[Any, Mapping[str, int]], Any] | None = None
    #: Why ``invisible-inputs-ignored`` cannot demand bitwise equality for this family
    #: (empty: it does; a masked-out input must change no bit of what it cannot reach).
    invisible_inexact: str = ""
    tpu_device_kind: str | None = None
