"""The arithmetic an implementation does outside its Pallas kernels (issue 55, item 3).

The count (:mod:`kernel_harness.run.kernel_count`) traces each call forward (and, for a
family with backward kernels, the joint forward ``jax.vjp`` runs and the backward it
returns); this module reads the same jaxprs for every primitive outside every kernel body but layout
and elementwise arithmetic (:func:`~kernel_harness.records.outside.measured`)
(:func:`kernel_harness.core.compat.pallas_count.outside_ops`: every ``cond`` branch,
loop and ``custom_vjp`` body included).

What counts as the problem's size: the call's *problem size* P is the elements of its
largest input or output array. A measured primitive counts when the elements its
equations touch outside the kernels (each equation: its largest operand or result, times
the trips of the ``scan``s around it), summed over all its equations, reach P /
:data:`FRACTION`. Summed, so that an answer computed in XLA a row or a block at a time
counts as the whole; a fraction of P, so that scalars and per-row statistics of a few
elements (a scale, a page count) do not, while a row max or a log-sum-exp over a
head_dim of up to 64 does. The elementwise work measured for a layout-only family is
judged an equation at a time instead (each must reach P / :data:`FRACTION` itself): a
wrapper's float metadata over many groups adds up, its answer does not. Inside a
``while`` loop (trips unknown) a measured primitive counts at any size. A host callback
(``pure_callback``, ``io_callback``, ``buffer_callback``) counts by the same rule, its
operands and results being what it touches: one that takes the inputs to the host or
brings an answer back counts, one that reads a scalar flag does not.
Transcendentals, reductions and divisions count only on floating operands: integer ones
are index arithmetic.

Inside a kernel body (:func:`kernel_harness.core.compat.pallas_count.kernel_body_ops`),
math is the kernel's own: nothing is measured there but host callbacks that return a value
to the kernel (``pure_callback``; ``io_callback``, ``buffer_callback`` with results), which
count at any size, named as ``pure_callback in a kernel body``: the kernel hands its data
to the host and copies back the host's answer, computing nothing itself (and no GPU or TPU
kernel lowers a host callback: only the interpreters run it). No family may allow one.
``jax.debug.print``, ``jax.debug.callback`` (and an ``io_callback`` returning nothing) only
observe the kernel: real kernels use them to debug, they return nothing to it, so they are
never measured.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kernel_harness.core.compat import kernel_flow, pallas_count
from kernel_harness.records.outside import (
    CALLBACKS,
    MATMUL,
    METADATA_SUFFIX,
    MOVES,
    STRICT,
    STRICT_SUFFIX,
    VALUES_SUFFIX,
    OutsideKernel,
    measured,
)

#: The failure class, as reports and events name it.
OUTSIDE = "math outside the kernel"

#: A measured primitive counts from 1/FRACTION of the problem's size on.
FRACTION = 64

#: How a host callback answering inside a kernel body is named (``pure_callback`` + this).
IN_KERNEL = " in a kernel body"

#: How a declared core primitive no kernel computes is named: ``exp|exp2`` + this.
NO_KERNEL = " in no kernel"

#: How a declared core perturbed inside the kernel bodies that changed no output the kernels
#: write is named: ``exp|exp2|reduce_sum`` + this (:mod:`kernel_harness.run.kernel_poison`).
CANCELLED = " cancelled in the kernel"


def problem_size(shapes: Iterable[tuple[int, ...]]) -> int:
    """The elements of the largest of ``shapes`` (the call's inputs and outputs)."""
    return max((math.prod(s) for s in shapes), default=0)


def measure(jaxprs: Iterable[Any], problem: int, *, strict: bool = False) -> tuple[str, ...]:
    """The measured primitives ``jaxprs`` (one pass: a jaxpr or several) run outside their
    Pallas kernels on arrays of the problem's size ``problem``, and the host callbacks that
    answer inside a kernel body (``pure_callback in a kernel body``), sorted by name;
    ``strict``: the elementwise arithmetic, comparisons and gathers of
    :data:`~kernel_harness.records.outside.STRICT` too, each named with ``STRICT_SUFFIX``,
    and, at any size, every primitive that reads the data's values rather than moves them
    (:data:`~kernel_harness.records.outside.MOVES`), named with ``VALUES_SUFFIX`` (both
    judged only for a family whose wrapper is layout only, the reads too for one that
    declares what its wrapper reads with: :func:`disallowed`)."""
    touched: collections.Counter = collections.Counter()
    always: set[str] = set()
    readers: set[str] = set()
    metadata: set[str] = set()
    floor = max(2, problem // FRACTION)  # a scalar (a flag, a scale) is never the answer
    for jaxpr in jaxprs:
        if strict:
            readers |= kernel_flow.value_readers(jaxpr, MOVES)
            metadata |= kernel_flow.value_readers(jaxpr, MOVES, integers=True)
        for op in pallas_count.outside_ops(jaxpr):
            if not (measured(op.name) or (strict and op.name in STRICT)) \
                    or not (op.inexact or op.name in MATMUL | CALLBACKS) \
                    or (op.name == "select_n" and not op.chooses):
                continue
            name = op.name + STRICT_SUFFIX if op.name in STRICT else op.name
            if op.name in STRICT and op.elements < floor:
                # Elementwise work is judged an equation at a time: a wrapper's many
                # small ones on metadata (megablox's per-group tile counts, in float, over
                # 56 groups: five ops of 56-112 elements) add up to no answer.
                continue
            if op.unbounded:
                always.add(name)
            else:
                touched[name] += op.elements
        for body_op in pallas_count.kernel_body_ops(jaxpr):
            if body_op.name in CALLBACKS and body_op.results:
                always.add(body_op.name + IN_KERNEL)  # at any size: see the module's doc
    names = always | {name for name, n in touched.items() if n >= floor}
    return tuple(sorted(names | {r + VALUES_SUFFIX for r in readers}
                        | {r + METADATA_SUFFIX for r in metadata - readers}))


def core_missing(jaxpr: Any, computes: Iterable[str], names: Sequence[str]
                 ) -> tuple[str, ...]:
    """The declared core groups (``exp|exp2``: ``KernelExpectation.*_computes``) that no
    Pallas kernel of ``jaxpr`` (one pass) computes into every output some kernel's result
    reaches (:func:`kernel_harness.core.compat.kernel_flow.reach`; ``names``: one per
    output of ``jaxpr``, "" for one never judged), named ``exp|exp2 in no kernel``."""
    groups = list(computes)
    if not groups:
        return ()
    flows = kernel_flow.reach(jaxpr, [frozenset(g.split("|")) for g in groups])
    judged = [per for i, (kernel, per) in enumerate(flows)
              if kernel and i < len(names) and names[i]]
    return tuple(f"{group}{NO_KERNEL}" for k, group in enumerate(groups)
                 if any(not per[k] for per in judged))


def core_names(forward: Iterable[str], backward: Iterable[str]) -> dict[str, frozenset[str]]:
    """The passes whose declared core (``KernelExpectation.*_computes``) is perturbed, with
    its primitives: the forward only. Perturbing the backward compiles the forward and
    backward kernels twice more (hstu: minutes of interpret-mode compiling); its core's flow
    is still followed (:func:`core_missing`)."""
    del backward
    merged = frozenset(n for group in forward for n in group.split("|"))
    return {"forward": merged} if merged else {}


def cancelled_name(names: Iterable[str]) -> str:
    """``exp|exp2|reduce_sum cancelled in the kernel``: a pass's core, perturbed inside the
    kernel bodies, changed none of the outputs the kernels write."""
    return "|".join(sorted(names)) + CANCELLED


def pass_names(found: Iterable[str], cancelled: Iterable[frozenset[str]]) -> tuple[str, ...]:
    """A pass's names, sorted: what it ran outside (``found``), and its core perturbed in
    vain (``cancelled``: :func:`cancelled_name`) unless a core group is in no kernel at all
    (then the perturbation could only change nothing: said once, as missing)."""
    names = set(found)
    if not any(n.endswith(NO_KERNEL) for n in names):
        names |= {cancelled_name(core) for core in cancelled}
    return tuple(sorted(names))


def disallowed(found: Mapping[str, tuple[str, ...]], declared: OutsideKernel,
               skip: Iterable[str] = ()) -> dict[str, tuple[str, ...]]:
    """Per pass (``forward``, ``backward``), the primitives ``found`` there that
    ``declared`` does not allow; the passes in ``skip`` (already failed as running no
    kernel, or a declared fallback) and passes with none are left out."""
    left_out = set(skip)
    out = {}
    for where, names in found.items():
        extra = [n for n in names if not declared.permits(where, n) and declared.judged(n)]
        # The reads are said only where nothing else is, as one name ("eq, select_n
        # reading the data's values"), the floating inputs' before the integer ones'.
        said = [n for n in extra if not n.endswith((VALUES_SUFFIX, METADATA_SUFFIX))]
        for suffix in (VALUES_SUFFIX, METADATA_SUFFIX):
            reads = [n.removesuffix(suffix) for n in extra if n.endswith(suffix)]
            if reads and not said:
                said = [", ".join(reads) + suffix]
        extra = said
        if extra and where not in left_out:
            out[where] = tuple(extra)
    return out


def split_strict(bad: Mapping[str, tuple[str, ...]], strict: bool
                 ) -> dict[str, tuple[str, ...]]:
    """``bad`` (:func:`disallowed`'s) with only the names measured for a layout-only family
    (``strict``, their suffix dropped) or only the others."""
    out = {}
    for where, names in bad.items():
        picked = tuple(n.removesuffix(STRICT_SUFFIX) for n in names
                       if n.endswith(STRICT_SUFFIX) == strict)
        if picked:
            out[where] = picked
    return out


#: The kinds of names said apart, in the order said: the suffix, how names are joined,
#: and what they mean.
_SAID_APART = (
    (CANCELLED, "; ", "the op's core, perturbed inside the kernel bodies (each result x times "
     "0.5-0.75), changed no output the kernels write: the kernels compute it and their "
     "result does not use it (cancelled: 0 * x, x - x, a clamp to zero); the answer is "
     "computed elsewhere"),
    (NO_KERNEL, "; ", "the family declares this the op's core, computed inside its kernels "
     "(KernelExpectation.*_computes); for some output a kernel's result reaches, no kernel "
     "body computes it into that result: the kernels move an answer computed elsewhere"),
    (IN_KERNEL, ", ", "a host callback returns values into the kernel, so the host computes "
     "what the kernel returns (no GPU or TPU kernel lowers a host callback; no family may "
     "allow one in a kernel body; jax.debug.print and jax.debug.callback return nothing: "
     "fine)"),
    (VALUES_SUFFIX, ", ", "the family's wrapper only moves its data (layout only) or reads "
     "it with no more than it declares (OutsideKernel.reads), and outside every kernel "
     "these read values derived from the inputs or a kernel's results (compare, cast "
     "to bits or integers, choose a slice's start or a select's case by them), at any size: "
     "an answer that depends on the data other than through the kernel's math"),
    (METADATA_SUFFIX, ", ", "outside every kernel these read the integer inputs' values "
     "(segment ids, lengths, group sizes: compare them with constants, mask their bits, "
     "select by them), which the family's wrapper only passes to its kernels, at any size: "
     "an answer keyed on integers the draws may never hit"),
)


def problem_text(bad: Mapping[str, tuple[str, ...]], declared: OutsideKernel) -> str:
    """``exp, reduce_sum outside any Pallas kernel (forward); ...``, then what the family
    allows there; the core perturbed in vain, the core in no kernel and a host callback
    answering inside a kernel body are said first, each as such."""
    said = []
    for suffix, joiner, meaning in _SAID_APART:
        parts = [f"{joiner.join(picked)} ({where})" for where, names in bad.items()
                 if (picked := [n for n in names if n.endswith(suffix)])]
        if parts:
            said.append(f"{'; '.join(parts)}: {meaning}")
    suffixes = tuple(suffix for suffix, _, _ in _SAID_APART)
    outside = {where: [n for n in names if not n.endswith(suffixes)]
               for where, names in bad.items()}
    if any(outside.values()):
        parts = [f"{', '.join(names)} outside any Pallas kernel ({where})"
                 for where, names in outside.items() if names]
        allows = "; ".join(
            f"{where}: {', '.join(sorted(declared.allowed(where))) or 'nothing beyond layout'}"
            for where, names in outside.items() if names)
        said.append(f"{'; '.join(parts)} on arrays of the problem's size (the family's kernel "
                    f"computes it; what the family allows outside its kernels: {allows})")
    return "; ".join(said)
