"""The largest sizes a family's kernel is meant for (issue 55, item 5), checked without
paying for them: the ``claimed-sizes`` property traces the implementation at each claimed
size on abstract inputs (nothing is allocated or run) and compares what it would run there
with what it runs at a small size (:mod:`kernel_harness.checks.claimed_sizes`).

Softmax rows are vocabularies (32k-256k), attention runs 8k-128k tokens: an implementation
that runs its kernel only for the sizes a test draws (a "ghost branch": plain XLA, a
constant, a fallback or a concatenation past some size) passes every drawn case.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

#: Abstract inputs by name (``jax.ShapeDtypeStruct``: shape and dtype, no data).
Abstract = Mapping[str, Any]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Claim:
    """Where a kernel claims to work, and how to call it on abstract inputs.

    Attributes:
      reason: why these sizes (what the kernel is for), printed by ``describe``.
      sizes: the claimed sizes, as abstract inputs (the largest the kernel is meant for;
        a few, not a sweep: tracing one costs about what tracing a small one does).
      small: a small size of the same call, the baseline of the comparison.
      call: ``call(impl, arrays) -> outputs``: the implementation called on named arrays as
        the family's adapter calls it (its ``interpret=`` from
        ``kernel_harness.current_backend()``).
      uses: ``uses(arrays) -> features``: the optional features (``Family.optional``) a
        claimed size uses; a size using one the check leaves out (``--without``) is not
        traced, and neither is one of a dtype left out.
    """

    reason: str
    sizes: Callable[[], Sequence[Abstract]]
    small: Callable[[], Abstract]
    call: Callable[[Callable[..., Any], Mapping[str, Any]], Any]
    uses: Callable[[Abstract], frozenset[str]] = lambda arrays: frozenset()

    def kept(self, without: frozenset[str]) -> list[Abstract]:
        """The claimed sizes that use nothing ``without`` leaves out (features, dtypes)."""
        def used(arrays: Abstract) -> frozenset[str]:
            return self.uses(arrays) | {str(a.dtype) for a in arrays.values()}

        return [a for a in self.sizes() if not used(a) & without]

    def __post_init__(self) -> None:
        if not self.reason.strip():
            raise ValueError("Claim.reason must say why these sizes")

    def describe(self) -> list[str]:
        """Lines for ``kernel-harness describe``: each claimed size and the reason."""
        lines = [f"claimed sizes (traced, not run; {self.reason}):"]
        for arrays in self.sizes():
            lines.append("  " + ", ".join(f"{name} {tuple(a.shape)} {a.dtype}"
                                          for name, a in arrays.items()))
        return lines
