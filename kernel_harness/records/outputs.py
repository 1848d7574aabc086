"""A family's facts about its outputs, gathered per case into the records the judge takes.

A family declares its outputs' facts where they are natural to write: axes
(``Family.output_axes``), a tolerance per (dtype, output) (``Family.tolerances``), the
contract's masks per case (``Family.valid``), slice axes, which outputs may be non-finite,
the adapter's extra outputs that must equal another (``Family.same_as``), and the outputs
a case does not compare (``Family.not_compared``). :func:`judged_outputs` is the one place
they meet: one :class:`~kernel_harness.core.judges.JudgedOutput` per compared output, read
by matches-reference, golden checks, sharding and exported scripts alike.
"""

from __future__ import annotations

from typing import Any

from kernel_harness.core.judges import JudgedOutput
from kernel_harness.records.family import Family


def judged_outputs(family: Family, case: Any, *, same_as: bool = True,
                   compared_only: bool = True) -> tuple[JudgedOutput, ...]:
    """One record per output ``family`` judges for ``case``: every declared output, then
    (``same_as``) each extra output of ``Family.same_as`` judged as its reference output;
    ``compared_only`` leaves out what ``Family.not_compared(case)`` names (an extra whose
    reference is not compared goes with it)."""
    valid = family.valid(case)
    skip = family.not_compared(case) if compared_only else {}
    pairs = [(name, name) for name in family.output_axes if name not in skip]
    if same_as:
        pairs += [(name, ref) for name, ref in family.same_as.items() if ref not in skip]
    return tuple(
        JudgedOutput(name=name, reference=ref, axes=tuple(family.output_axes[ref]),
                     tolerance=family.tolerances.lookup(case.dtype, ref),
                     slice_axes=family.slice_axes.get(ref), valid=valid.get(ref),
                     nonfinite_reference_ok=ref in family.nonfinite_reference_ok,
                     dtype=case.dtype)
        for name, ref in pairs)
