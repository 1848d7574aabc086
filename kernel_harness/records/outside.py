"""What a family's wrapper may compute outside its Pallas kernels (issue 55, item 3).

A kernel that only copies an answer computed in XLA (or fetched by a host callback) runs
as many kernels as the real one, and its result is the answer. So the harness measures the
arithmetic an implementation's call does outside its kernels, forward and backward
(:mod:`kernel_harness.run.kernel_outside`): the primitives of :data:`MEASURED` on arrays of
the problem's size. Anything a family's own kernel legitimately does there (quantizing
activations, routing, a gradient XLA computes from a residual) is declared on the family
record as an :class:`OutsideKernel`, each primitive with its reason; any other is a FAIL,
class "math outside the kernel". Layout (reshape, transpose, pad, slice, concatenate, casts,
indexing) and elementwise arithmetic (add, mul, select, comparisons) are never measured
(:data:`UNMEASURED`); every other primitive is.
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
#: The primitives named above (a family may allow these, each with its reason).
MEASURED = MATMUL | TRANSCENDENTAL | REDUCTIONS | DIVISION | CALLBACKS

#: Layout: moving, selecting, padding, casting and indexing values, and collectives that
#: only move them. Never measured.
LAYOUT = frozenset({
    "reshape", "transpose", "broadcast_in_dim", "squeeze", "expand_dims", "pad", "slice",
    "dynamic_slice", "dynamic_update_slice", "concatenate", "split", "rev", "iota", "copy",
    "copy_p", "device_put", "convert_element_type", "bitcast_convert_type", "reduce_precision",
    "select_n", "gather", "scatter", "stop_gradient", "optimization_barrier",
    "sharding_constraint", "mesh_cast", "reshard", "all_gather", "all_to_all", "ppermute",
    "axis_index", "pbroadcast", "pvary", "random_bits", "random_seed", "random_wrap",
    "random_unwrap", "threefry2x32", "rng_bit_generator", "debug_callback", "debug_print",
    "with_memory_space_constraint", "stack", "unstack", "tile", "zeros_like", "empty",
    "empty2", "layout_constraint", "shard_alike", "inspect_sharding", "name", "tie", "stage",
    "shape", "platform_index", "freeze", "new_ref", "empty_ref", "free_ref", "check",
    "dce_sink", "xla_metadata_value", "from_edtype", "to_edtype", "reduced_vary_cast_p",
    "vary_unreduced_cast_p", "after_all", "create_token", "psend", "precv",
    "all_gather_start", "all_gather_done", "all_gather_invariant", "all_to_all_start",
    "all_to_all_done", "ragged_all_to_all", "ppermute_start", "ppermute_done",
    "pbroadcast_start", "pbroadcast_done",
    # structural: their bodies are walked (pallas_count.outside_ops), not they themselves
    "call", "composite", "custom_vmap_call", "custom_linear_solve", "remat2", "remat_opt",
    "eval_jaxpr", "call_hi_primitive", "call_hi_primitive_linearized", "custom_partitioning",
    "compute_on"})
#: Elementwise arithmetic and comparisons: a wrapper scales, offsets, masks and clamps
#: (a softmax scale, a mask's select, a quantization's rounding). Measured only where the
#: family says its wrapper needs none (``OutsideKernel.layout_only``); else what an
#: answer built from these alone needs (a sum, an exponential) is measured, and the op's
#: core is required inside the kernels (``KernelExpectation.*_computes``).
ELEMENTWISE = frozenset({
    "add", "add_any", "sub", "mul", "neg", "max", "min", "abs", "sign", "floor", "ceil",
    "round", "clamp", "eq", "ne", "lt", "le", "gt", "ge", "and", "or", "not", "xor",
    "shift_left", "shift_right_logical", "shift_right_arithmetic", "rem", "integer_pow",
    "square", "nextafter", "is_finite", "population_count", "clz", "real", "imag",
    "conj", "complex", "mulhi", "eq_to", "le_to", "lt_to", "reduce_and", "reduce_or",
    "reduce_xor"})
#: What a family whose wrapper is layout only (``OutsideKernel.layout_only``) has measured
#: too: elementwise arithmetic and comparisons (a where on a sentinel compares), the
#: gathers that move values by a computed index (a constant permutation of rows past the
#: drawn sizes: round 8 of the adversarial set), a ``select_n`` choosing between two
#: computed arrays (``where(row < 520, out, roll(out))``: an integer test, a layout
#: move), and a float rounded by ``reduce_precision`` (arithmetic spelled as layout). Not
#: ``bitcast_convert_type``: the planted cheats of other classes move their outputs' bits
#: with it (``tests/helpers/generic_cheats.bits_added``) to stay named for their own
#: class; a wrapper's bit arithmetic is judged by value at the drawn sizes and, past them,
#: by the wrapper comparison with kernels stood in for. A ``select_n`` whose other cases
#: are literals or broadcast scalars only masks (megablox zeroes the rows outside a
#: shard's groups so): not measured.
STRICT = ELEMENTWISE | frozenset({"gather", "scatter", "rev", "select_n",
                                  "reduce_precision"})
#: How a primitive of :data:`STRICT` is named where it is measured: ``mul`` + this (judged
#: only for a layout-only family).
STRICT_SUFFIX = " (elementwise)"
#: What only moves values, for a layout-only family's wrapper: a primitive outside the
#: kernels that takes a value derived from the floating inputs or a kernel's results and is
#: not one of these (or is one choosing by it: a ``select_n`` predicate, a dynamic start, a
#: gather's indices, a cast to an integer) reads the data's values, at any size
#: (``kernel_flow.value_readers``): round 13 of the adversarial set rolled the kernel's
#: result by a shift read from the bits of x's first element, one scalar, under every size
#: floor. Reading bits (``bitcast_convert_type``) or rounding (``reduce_precision``) is not
#: moving.
MOVES = LAYOUT - {"bitcast_convert_type", "reduce_precision"}
#: How a primitive that reads the data's values is named: ``bitcast_convert_type`` + this
#: (judged only for a layout-only family).
VALUES_SUFFIX = " reading the data's values"
#: How a primitive that reads the integer inputs' values (and not the floating ones) is
#: named: ``eq`` + this (judged as :data:`VALUES_SUFFIX` is, unless the family says why
#: its wrapper computes from them: :attr:`OutsideKernel.metadata`).
METADATA_SUFFIX = " reading the integer inputs' values"
#: What is never measured outside the kernels. Every other primitive on floating arrays
#: of the problem's size is (a sort, an FFT, a triangular solve, a scatter-add, a cumulative
#: or windowed reduction, a primitive newer than this list: an allowlist, not a list of
#: the arithmetic an answer could be spelled with).
UNMEASURED = LAYOUT | ELEMENTWISE


def measured(name: str) -> bool:
    """Whether the primitive ``name`` is measured outside the kernels."""
    return name in MEASURED or name not in UNMEASURED

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
      layout_only: non-empty: the family's wrapper only reshapes, transposes, casts,
        pads, slices and selects around its kernels, and this says why; elementwise
        arithmetic, comparisons and gathers (:data:`STRICT`) on floating arrays of the
        problem's size are then measured too (round 8 of the adversarial set scaled rows
        and columns past the drawn sizes by a constant multiplied outside the kernel, with
        the same program at every size).

      reads: for a family whose wrapper is not layout only, the primitives it reads the
        data's values with outside its kernels (:data:`MOVES`, ``kernel_flow.
        value_readers``), and why: an implementation's wrapper that reads them with any
        other (a comparison of bits, a select chosen by them) fails at any size, as a
        layout-only one does with any (round 13 of the adversarial set keyed gpu-decode's
        output on the bits of q's first features). Empty: not judged (a layout-only
        family reads with none).
      metadata: non-empty: the family's wrapper computes from its integer inputs (group
        sizes into tile metadata), and this says why; the reads of the integer inputs
        (:data:`METADATA_SUFFIX`) are then not judged. Empty: a wrapper that reads an
        integer input otherwise than the family declares (a segment id or a length
        compared with a constant: round 13) fails as one reading the data's values.

    The default allows nothing beyond layout: a copy kernel with the math in XLA fails.
    """

    forward: Mapping[str, str] = dataclasses.field(default_factory=dict)
    backward: Mapping[str, str] = dataclasses.field(default_factory=dict)
    by_design: str = ""
    layout_only: str = ""
    reads: Mapping[str, str] = dataclasses.field(default_factory=dict)
    metadata: str = ""

    def __post_init__(self) -> None:
        for where, allowed in (("forward", self.forward), ("backward", self.backward)):
            unknown = set(allowed) - MEASURED
            if unknown:
                raise ValueError(f"OutsideKernel.{where} names primitives the harness does "
                                 f"not measure or does not know: {sorted(unknown)} (a family "
                                 f"may allow: {', '.join(sorted(MEASURED))})")
            blank = [p for p, why in allowed.items() if not str(why).strip()]
            if blank:
                raise ValueError(f"OutsideKernel.{where}: each allowed primitive needs its "
                                 f"reason; {sorted(blank)} have none")
        if self.reads and (self.layout_only or not all(str(w).strip()
                                                         for w in self.reads.values())):
            raise ValueError("OutsideKernel.reads: each primitive needs its reason, and a "
                             "layout-only wrapper reads the data's values with none")
        if self.by_design and (self.forward or self.backward or self.layout_only):
            raise ValueError("OutsideKernel: a family computed outside Pallas by design "
                             "lists no allowed primitives")

    def allowed(self, where: str) -> Mapping[str, str]:
        """The primitives ``where`` (``"forward"`` or ``"backward"``) may run outside."""
        return self.forward if where == "forward" else self.backward

    def judged(self, name: str) -> bool:
        """Whether a measured name (a primitive, or a said-apart name) is judged at all:
        those of :data:`STRICT` (:data:`STRICT_SUFFIX`) and the reads of the data's values
        (:data:`VALUES_SUFFIX`) only where :attr:`layout_only` says so (the reads too where
        :attr:`reads` is declared)."""
        if name.endswith(METADATA_SUFFIX) and self.metadata:
            return False
        if name.endswith((VALUES_SUFFIX, METADATA_SUFFIX)):
            return bool(self.layout_only or self.reads)
        return not name.endswith(STRICT_SUFFIX) or bool(self.layout_only)

    def permits(self, where: str, name: str) -> bool:
        """Whether a measured ``name`` found in pass ``where`` is allowed: a primitive the
        pass may run outside, or a read of the data's values by a primitive the family's
        wrapper reads with (:attr:`reads`)."""
        for suffix in (VALUES_SUFFIX, METADATA_SUFFIX):
            if name.endswith(suffix):
                return name.removesuffix(suffix) in self.reads
        return name in self.allowed(where)

    def describe(self) -> list[str]:
        """One line per allowance, for ``describe``: ``forward: reduce_max (why)``, or
        that nothing is allowed beyond layout, or why nothing is measured."""
        if self.by_design:
            return [f"not measured: {self.by_design}"]
        lines = [f"{where}: {name} ({why})" for where in PASSES
                 for name, why in sorted(self.allowed(where).items())]
        lines = lines or ["nothing beyond layout (reshape, transpose, pad, slice, casts, "
                          "elementwise): any other primitive (a matmul, transcendental, "
                          "reduction, division, sort, FFT, solve...) on arrays of the "
                          "problem's size or a host callback fails"]
        by_reason: dict[str, list[str]] = {}
        for name, why in sorted(self.reads.items()):
            by_reason.setdefault(why, []).append(name)
        lines += [f"reads the data's values with: {', '.join(names)} ({why})"
                  for why, names in by_reason.items()]
        if self.metadata:
            lines.append(f"computes from its integer inputs: not judged ({self.metadata})")
        if self.layout_only:
            lines.append(f"layout only: elementwise arithmetic, comparisons, gathers, "
                         f"choices between computed arrays and rounding measured too "
                         f"({self.layout_only})")
        return lines
