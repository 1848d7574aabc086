"""What a rotary family's ``Family`` record takes from the op, written once.

A family gives its case type and strategy (the op's fields, then how its kernel stages
the rotation), its tolerances with their reasons, its ``traceable`` and block variants,
whether its kernel has a backward and rotates part of a head, and the labels of its own
configuration; :func:`rotary_record` returns the op's part: the reference (forward, or
with ``dx``), the output axes, the rows outside the contract, the op's labels and the
modes its strategy reaches, and the metamorphic hooks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from kernel_harness.core.case import Arrays
from kernel_harness.ops.rotary.cases import (
    DTYPES,
    RotaryCase,
    reference,
    rotary_events,
    valid,
)
from kernel_harness.ops.rotary.reference import PAIRINGS
from kernel_harness.records.hooks import Metamorphic

#: The op's outputs and their axes (``dx`` where the kernel has a backward).
OUTPUT_AXES: dict[str, tuple[str, ...]] = {"out": ("token", "head", "dim"),
                                           "dx": ("token", "head", "dim")}


def rotary_modes(*, partial: bool) -> frozenset[str]:
    """The op's labels (:func:`~.cases.rotary_events`) its strategy
    (:func:`~.cases.rotary_fields`, every dtype and pairing) reaches: ``partial-rotary``
    where it draws partial rotary."""
    return frozenset({
        *DTYPES, *(f"pairing:{p}" for p in PAIRINGS), "large-positions", "odd-offset",
        "zero-offset", "multi-seq", "pad-tokens", *(["partial-rotary"] if partial else [])})


def rotary_record(*, gradients: bool, partial: bool,
                  traceable: Callable[..., Any] | None = None,
                  block_variants: Callable[[Any], Any] | None = None,
                  config_events: Callable[[Any], Sequence[str]] = lambda case: (),
                  config_modes: frozenset[str] = frozenset()) -> dict[str, Any]:
    """``Family`` fields of a rotary kernel: the op's reference (``out``, and ``dx`` with
    ``gradients``: a kernel with a backward), output axes and capabilities to match, the
    pad tokens outside the contract (``valid``), its labels (the op's, then
    ``config_events``) and modes (:func:`rotary_modes`, ``partial``: the strategy draws
    partial rotary; then ``config_modes``), and the metamorphic hooks (no queries and
    keys: deterministic, finite-out with x scaled, lowers-for-tpu through ``traceable``,
    block-size invariance over ``block_variants``)."""
    outputs = ("out", "dx") if gradients else ("out",)

    def op_reference(case: RotaryCase, inputs: Arrays) -> Arrays:
        """The op's reference: out, and dx where the kernel has a backward."""
        return reference(case, inputs, gradients=gradients)

    return dict(
        reference=op_reference, output_axes={o: OUTPUT_AXES[o] for o in outputs},
        capabilities=frozenset({"gradients"} if gradients else ()), valid=valid,
        events=lambda case: sorted({*rotary_events(case), *config_events(case)}),
        modes=rotary_modes(partial=partial) | config_modes,
        metamorphic=Metamorphic(roles={}, logit_input="x", traceable=traceable,
                                block_variants=block_variants))
