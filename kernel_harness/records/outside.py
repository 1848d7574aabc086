"""What a family's wrapper may compute outside its Pallas kernels (issue 55, item 3).

A kernel that only copies an answer computed in XLA (or fetched by a host callback) runs
as many kernels as the real one, and its result is the answer. So the harness measures the
arithmetic an implementation's call does outside its kernels, forward and backward
(:mod:`kernel_harness.run.kernel_outside`): the primitives of :data:`MEASURED` on arrays of
the problem's size. Anything a family's own kernel legitimately does there (quantizing
activations, routing, a gradient XLA computes from a residual) is declared on the family
record as an :class:`OutsideKernel`, each primitive with its reason; any other is a FAIL,
class "math outside the kernel". Layout (reshape, transpose, pad, slice, concatenate, casts,
elementwise add/mul/select) is never measured.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

#: Matrix products: measured whatever their dtype (an int8 product is a matmul too).
MATMUL = frozenset({"dot_general", "ragged_dot_general", "conv_general_dilated"})
#: Transcendental and root functions, measured on floating operands.
TRANSCENDENTAL = frozenset({
    "exp", "exp2", "expm1", "log", "log1p", "logistic", "tanh", "erf", "erfc", "erf_inv",
    "pow", "sqrt", "rsqrt", "cbrt", "sin", "cos", "tan", "atan2", "sinh", "cosh", "lgamma",
    "digamma"})
#: Reductions, scans and selections over an axis, measured on floating operands (integer
#: ones are index arithmetic: a cumsum of group sizes, a page count).
REDUCTIONS = frozenset({
    "reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce", "argmax", "argmin",
    "cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp", "top_k"})
#: Division, measured on floating operands.
DIVISION = frozenset({"div"})
#: Host callbacks: measured by what they touch, whatever the dtype (a callback taking the
#: inputs to the host or bringing an answer back; ``debug_callback`` and ``debug_print``
#: return nothing to the program: never measured). Inside a kernel body, one that returns
#: a value fails at any size (:mod:`kernel_harness.run.kernel_outside`).
CALLBACKS = frozenset({"pure_callback", "io_callback", "buffer_callback"})
#: Every primitive measured outside the kernels.
MEASURED = MATMUL | TRANSCENDENTAL | REDUCTIONS | DIVISION | CALLBACKS

#: The passes, as reports name them.
PASSES = ("forward", "backward")


@dataclasses.dataclass(frozen=True)
class OutsideKernel:
    """What an implementation of a family may compute outside its Pallas kernels.

    Attributes:
      forward: measured primitives (:data:`MEASURED`) the forward call may run outside
        its kernels on arrays of the problem's size, each with its reason. The forward
        includes what a ``custom_vjp`` forward rule runs for the gradient.
      backward: the same for the backward (the function ``jax.vjp`` returns).
      by_design: for a family whose kernel is not Pallas at all (XLA, torch: no
        ``Family.kernels``), why; nothing is measured then.

    The default allows nothing beyond layout: a copy kernel with the math in XLA fails.
    """

    forward: Mapping[str, str] = dataclasses.field(default_factory=dict)
    backward: Mapping[str, str] = dataclasses.field(default_factory=dict)
    by_design: str = ""

    def __post_init__(self) -> None:
        for where, allowed in (("forward", self.forward), ("backward", self.backward)):
            unknown = set(allowed) - MEASURED
            if unknown:
                raise ValueError(f"OutsideKernel.{where} names primitives the harness does "
                                 f"not measure: {sorted(unknown)} (measured: "
                                 f"{', '.join(sorted(MEASURED))})")
            blank = [p for p, why in allowed.items() if not str(why).strip()]
            if blank:
                raise ValueError(f"OutsideKernel.{where}: each allowed primitive needs its "
                                 f"reason; {sorted(blank)} have none")
        if self.by_design and (self.forward or self.backward):
            raise ValueError("OutsideKernel: a family computed outside Pallas by design "
                             "lists no allowed primitives")

    def allowed(self, where: str) -> Mapping[str, str]:
        """The primitives ``where`` (``"forward"`` or ``"backward"``) may run outside."""
        return self.forward if where == "forward" else self.backward

    def describe(self) -> list[str]:
        """One line per allowance, for ``describe``: ``forward: reduce_max (why)``, or
        that nothing is allowed beyond layout, or why nothing is measured."""
        if self.by_design:
            return [f"not measured: {self.by_design}"]
        lines = [f"{where}: {name} ({why})" for where in PASSES
                 for name, why in sorted(self.allowed(where).items())]
        return lines or ["nothing beyond layout (reshape, transpose, pad, slice, casts, "
                         "elementwise): any matmul, transcendental, reduction, division "
                         "on arrays of the problem's size or host callback fails"]
