"""Op relations: metamorphic properties an operation declares as data.

The attention relations (invisible inputs, segments, block sizes, options, GQA) are
written once over :class:`kernel_harness.records.hooks.Metamorphic`'s axis roles. Other
operations have relations of their own (softmax is shift invariant, rows of a norm are
independent, permuting groups of a grouped matmul permutes its output, permuting pages
together with the page table changes nothing). An op states each as a
:class:`Relation`: from a drawn case and its inputs, a :class:`Variant` (another case
and inputs) and what the variant's outputs must be, computed from the base run's
outputs. The harness runs the kernel on both and compares, element by element, against
the tolerance of each output (or bitwise), so every relation is a property of its own
(``kernel-harness check --property rows-independent``), with the same reports, repro
commands and corpus as the built-in properties.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from kernel_harness.core.case import Arrays

#: ``draw(strategy, label=...)``: draws one value (recorded, so the example replays).
Draw = Callable[..., Any]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Variant:
    """A transformed problem and what its outputs must equal.

    Attributes:
      case: the case to run (the drawn case itself when only inputs change).
      inputs: the inputs of that run.
      expected: ``expected(base_outputs) -> outputs``: what the variant's outputs must be,
        computed from the drawn case's outputs (a permutation, a scaling, the same
        values...); only the outputs it returns are compared.
      compared: per output, a bool mask (broadcast to the output) of the elements the
        relation says something about; an output not named is compared whole.
      exact: the relation holds bitwise (an input a result cannot read must not change a
        bit of it); else within ``factor`` times each output's tolerance.
      factor: multiple of the tolerance allowed when not ``exact`` (two kernel runs each
        within the tolerance of the truth differ by up to twice it).
      note: what was done, in words, for the failure report.
    """

    case: Any
    inputs: Arrays
    expected: Callable[[Arrays], Arrays]
    compared: Mapping[str, np.ndarray] = dataclasses.field(default_factory=dict)
    exact: bool = False
    factor: float = 2.0
    note: str = ""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Relation:
    """One metamorphic relation of an operation, run as a property named :attr:`name`.

    Attributes:
      name: the property's name (``shift-invariant``); must not be a built-in property's.
      doc: the relation in one sentence, for ``describe`` and reports.
      variant: ``variant(case, inputs, draw) -> Variant | None``: the transformed
        problem for this case (``draw`` draws any extra choice, recorded for the repro),
        None when the relation says nothing about this case (the example is rejected,
        and counted as such, never passed).
      fraction: share of the profile's examples the property runs (each runs the kernel
        twice).
    """

    name: str
    doc: str
    variant: Callable[[Any, Arrays, Draw], Variant | None]
    fraction: float = 0.1

    def __post_init__(self) -> None:
        if not self.name or self.name != self.name.strip() or " " in self.name:
            raise ValueError(f"relation name must be one word-like token, got {self.name!r}")
        if not 0.0 < self.fraction <= 1.0:
            raise ValueError(f"relation {self.name!r}: fraction must be in (0, 1]")


__all__ = ["Draw", "Relation", "Variant"]
