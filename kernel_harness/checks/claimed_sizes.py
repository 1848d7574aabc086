"""The ``claimed-sizes`` property: the implementation traced at every size its family
claims (:class:`~kernel_harness.records.claims.Claim`) and on a ladder of sizes between a
small size and each claimed one, on abstract inputs, and what it would run there compared
with what it runs at the small size (issue 55, item 5).

At a claimed size and at every rung the traced program must launch as many Pallas kernels
as at the small size (and at least what the family expects), and compute nothing the small
size does not (no math, host callback or concatenation appearing only past some size, or
only between the drawn sizes and the claimed ones: a "ghost branch", an implementation that
runs its kernel only for the sizes a test draws). Each example traces every claimed size
and its whole ladder, one rung per factor of 2, each rung's place inside its factor of 2
drawn by Hypothesis (:meth:`Claim.ladder`). A rung whose trace raises is a FAIL
(:class:`SizeRefused`): the claim says the kernel is meant for every size up to the claimed
one. Tracing allocates nothing and runs nothing, so a 256k-row softmax costs what a small
one does. The implementation's ``kernel_harness.current_backend()`` is the check's backend.

The small size is traced once more for the compiled backend the family targets (``tpu`` or
``gpu``, whichever it lists; traced, not lowered or run): a program that launches other
kernels or computes other math there than on the check's backend is a ghost branch too, one
no interpreted check would run (round 6 of the adversarial set passed a grouped matmul
rounding its operands to bfloat16 only when ``interpret`` is False, the test on a helper's
parameter). And where those agree, the two programs are compared whole, the kernels'
``interpret`` setting aside: a constant, an operand, a mask or an option that differs only
when compiled is a ghost branch whatever spells it (:func:`program_difference`; the pristine
kernels of every family that claims sizes trace the same program for both). What it cannot
see: a branch on the devices present (the trace runs here), and one that differs when
compiled only at other sizes than the small one.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

import hypothesis
from hypothesis import given
from hypothesis import strategies as st

from kernel_harness.checks import kernel_bodies, size_programs, wrapper_standin
from kernel_harness.core.backends import Backend
from kernel_harness.core.errors import PropertyNotApplicable
from kernel_harness.records.claims import STAND_IN_CAP, Abstract, Claim
from kernel_harness.records.family import Family
from kernel_harness.run.report import PREFIX

#: A rung's place inside its stretch of the ladder, in hundredths (integers shrink and
#: print more readably than floats).
JITTER_STEPS = 100


class GhostBranch(AssertionError):
    """The implementation runs another program at a claimed size (or a rung below it) than
    at a small one."""


class SizeRefused(GhostBranch):
    """Tracing the implementation raised at a rung between the small size and a claimed
    one: no program at a size the claim covers (reported as ``claimed size refused``)."""


def _shapes(arrays: Mapping[str, Any]) -> str:
    return " ".join(f"{n}={tuple(a.shape)}" for n, a in arrays.items())


def _dtypes(arrays: Mapping[str, Any]) -> str:
    return ",".join(sorted({str(a.dtype) for a in arrays.values()}))


def program_difference(call: Callable[..., Any], impl: Callable[..., Any],
                       arrays: Mapping[str, Any], here: Backend, compiled: Backend
                       ) -> str | None:
    """Where ``impl``'s program traced for ``compiled`` first differs from the one traced
    for ``here`` on the same ``arrays``, the kernels' ``interpret`` setting aside (the one
    parameter that is meant to differ), as ``here: <line> / compiled: <line>``; None where
    they are the same program. A wrapper that adds, drops or changes anything only when
    compiled (a constant, an operand, a mask, an option passed on) differs here whatever
    its spelling (round 9 chose its compiled path by a helper's parameter called ``exact``,
    which the source check did not read as ``interpret``)."""
    texts = [_INTERPRET.sub("interpret=*", str(wrapper_standin.traced(call, impl, arrays, b)))
             .splitlines() for b in (here, compiled)]
    for a, b in zip(*texts, strict=False):
        if a != b:
            return f"{here.name}: `{a.strip()[:120]}` / {compiled.name}: `{b.strip()[:120]}`"
    if len(texts[0]) != len(texts[1]):
        return (f"{here.name}: {len(texts[0])} line(s) of program / {compiled.name}: "
                f"{len(texts[1])}")
    return None


#: A kernel's interpret setting in a printed program (``interpret=True``,
#: ``interpret=InterpretParams(...)``): the one parameter meant to differ when compiled.
_INTERPRET = re.compile(r"interpret=[^\n]*")


def _held(arrays: Abstract) -> bool:
    """Whether the wrapper comparison holds ``arrays`` (:data:`STAND_IN_CAP`)."""
    return sum(math.prod(a.shape) for a in arrays.values()) <= STAND_IN_CAP


def _jitter(pairs: list[tuple[int, int]], drawn: list[int]
            ) -> Callable[[int, tuple[int, int]], float]:
    where = {pair: i for i, pair in enumerate(pairs)}

    def jitter(rung: int, pair: tuple[int, int]) -> float:
        i = where.get(pair)
        # A pair the discovery call did not ask about (a rung maker of a family's own that
        # branches on extents): the middle of its stretch, deterministically.
        if i is None:
            return 0.5
        return drawn[rung * len(pairs) + i] / JITTER_STEPS

    return jitter


def claimed_sizes(family: Family, *, backend: Backend, impl: Callable[..., Any] | None = None,
                  impl_spec: str | None = None, observer: Any = None) -> Callable[[], None]:
    """The property "at every claimed size, and at every size between the small one and a
    claimed one, the implementation runs the program it runs at a small size" (a SKIP for
    a family that claims no sizes)."""
    claim: Claim | None = family.claimed
    if claim is None:
        raise PropertyNotApplicable(
            f"{family.name} claims no sizes (Family.claimed): the largest sizes its kernel is "
            "meant for are not declared")
    sizes = claim.kept(family.without)
    if not sizes:
        raise PropertyNotApplicable(
            f"{family.name}: every claimed size uses what this check leaves out "
            f"({', '.join(sorted(family.without))})")
    fn = impl if impl is not None else family.kernel
    small = claim.small()
    base = size_programs.traced_at(claim.call, fn, small, backend)
    base_kernels, base_prims = base.kernels, base.prims
    expected = family.kernels.forward if family.kernels is not None else 0
    traced: dict[str, size_programs.Traced] = {}  # by shapes: rungs recur
    # An --impl's program must change with the size as the family's own does (round 11
    # changed a scale, a flag or a bound inside a kernel only past the sizes run).
    against = None if fn is family.kernel else kernel_bodies.AgainstFamily(
        claim.call, fn, family.kernel, small, backend, base)
    compiled = next((Backend(name=t, platform=t, note="traced for, not run")
                     for t in ("tpu", "gpu") if t in family.backends
                     and t != backend.name), None)

    stood_in: dict[str, str | None] = {}  # by shapes, as traced

    def stand_in_difference(arrays: Abstract) -> str | None:
        key = f"{_shapes(arrays)} {_dtypes(arrays)}"
        if key not in stood_in:
            stood_in[key] = wrapper_standin.compared(claim.call, fn, family.kernel, arrays,
                                                     claim.integers, backend)
        return stood_in[key]

    def wrapper_problem(arrays: Abstract) -> str | None:
        """How the implementation's kernels at this size depart from the family's
        (``kernel_bodies``), else, with kernels stood in for, how its wrapper differs at
        this size from the family's, where the two agree at the small size (a kernel not
        printed as one of the family's runs)."""
        if against is None:
            return None
        differs = against.problem(arrays)
        if differs is not None or stand_in_difference(small) is not None:
            return differs
        found = stand_in_difference(arrays)
        return None if found is None else (
            f"with every kernel stood in for (wrapper_standin), {found} there, and not at "
            f"{_shapes(small)}")

    def problems(arrays: Abstract) -> tuple[int, list[str]]:
        key = f"{_shapes(arrays)} {_dtypes(arrays)}"
        if key not in traced:
            traced[key] = size_programs.traced_at(claim.call, fn, arrays, backend)
        mine = traced[key]
        kernels, prims = mine.kernels, mine.prims
        found = []
        differs = None if against is None else against.problem(arrays, mine)
        if differs is not None:
            found.append(differs)
        if kernels != base_kernels or kernels < expected:
            found.append(f"the program launches {kernels} Pallas kernel(s) there, "
                         f"{base_kernels} at {_shapes(small)} (the family expects >= "
                         f"{expected})")
        extra = sorted(prims - base_prims)
        if extra:
            found.append(f"it computes {', '.join(extra)} there and not at {_shapes(small)}")
        return kernels, found

    def fail(arrays: Abstract, where: str, found: list[str]) -> GhostBranch:
        return GhostBranch(
            f"{PREFIX} FAIL {family.name} ghost branch {_dtypes(arrays)} {_shapes(arrays)} "
            f"backend={backend.name}: at this {where} " + "; ".join(found)
            + f"\n  claim: {claim.reason}")

    def record(check: tuple[Any, ...], held: bool) -> None:
        if observer is not None:  # every size traced counts; the example passed if all held
            observer.record_check(check)
            if not held:
                observer.end_example(False)

    # Every jitter drawn by @given, before the body runs: a run draws the same whatever
    # fails or stops it (Hypothesis replays a failure by its draws; a shrink budget that
    # runs out stops a run at its start).
    jitters = st.tuples(*(st.lists(st.integers(0, JITTER_STEPS - 1), min_size=n, max_size=n)
                          for n in (claim.steps(c) * len(claim.pairs(c)) for c in sizes)))

    @functools.cache  # traced once a run, judged every example
    def compiled_differences() -> tuple[str, ...]:
        assert compiled is not None
        kernels, prims = size_programs.structure(claim.call, fn, small, compiled)
        found = [f"launches {kernels} Pallas kernel(s), {base_kernels} on {backend.name}"
                 ] if kernels != base_kernels else []
        extra = sorted(prims - base_prims)
        if extra:
            found.append(f"computes {', '.join(extra)} and not on {backend.name}")
        if not found:
            differs = program_difference(claim.call, fn, small, backend, compiled)
            if differs is not None:
                found.append(f"is another program than on {backend.name} (first difference: "
                             f"{differs})")
        return tuple(found)

    def check_compiled() -> None:
        if compiled is None:
            return
        found = compiled_differences()
        record(("compiled", compiled.name), not found)
        if found:
            raise GhostBranch(
                f"{PREFIX} FAIL {family.name} ghost branch {_dtypes(small)} {_shapes(small)} "
                f"backend={backend.name}: traced for {compiled.name} (not run) the program "
                + " and ".join(found) + ": a branch only a compiled run takes")

    @given(drawn=jitters)
    def prop(drawn: tuple[list[int], ...]) -> None:
        check_compiled()
        # Every claimed size first (each traced once per run: the traces are kept), so a
        # ghost past the drawn sizes is reported at the claimed size it breaks.
        for index, claimed in enumerate(sizes):
            kernels, found = problems(claimed)
            hypothesis.event(f"claimed size {index}: {kernels} kernel(s)")
            record(("claimed size", index), not found)
            if found:
                raise fail(claimed, "claimed size (traced, not run)", found)
        compared: list[tuple[Abstract, str]] = []
        for index, claimed in enumerate(sizes):
            rungs = check_ladder(drawn[index], index, claimed)
            held = [a for a in (claimed, *reversed(rungs)) if _held(a)]
            if held:  # the claimed size, else the largest rung the comparison can hold
                compared.append((held[0], "claimed size (not run)" if held[0] is claimed
                                 else "size under a claimed one (not run)"))
        compared += [(a, "size under a claimed one (not run)")
                     for a in claim.kept(family.without, claim.stand_in_sizes)]
        for index, (arrays, where) in enumerate(compared):
            wrapper = wrapper_problem(arrays)
            record(("wrapper compared", index), wrapper is None)
            if wrapper is not None:
                raise fail(arrays, where, [wrapper])
        if observer is not None:
            observer.end_example(True)

    def check_ladder(drawn: list[int], index: int, claimed: Abstract) -> list[Abstract]:
        rungs = claim.ladder(claimed, _jitter(claim.pairs(claimed), drawn), family.without)
        hypothesis.event(f"ladder {index}: {len(rungs)} rung(s)")
        for r, arrays in enumerate(rungs):
            where = (f"size (traced, not run; rung {r + 1} of {len(rungs)} between "
                     f"{_shapes(small)} and the claimed {_shapes(claimed)})")
            try:
                _, found = problems(arrays)
            except Exception as e:  # noqa: BLE001 - any refusal at a covered size is a FAIL
                record(("rung", index, r), False)
                first = (str(e).strip().splitlines() or [""])[0][:300]
                raise SizeRefused(
                    f"{PREFIX} FAIL {family.name} claimed size refused {_dtypes(arrays)} "
                    f"{_shapes(arrays)} backend={backend.name}: tracing at this {where} "
                    f"raised {type(e).__name__}: {first}; the claim covers every size up to "
                    f"the claimed one\n  claim: {claim.reason}") from e
            record(("rung", index, r), not found)
            if found:
                raise fail(arrays, where, found)
        return rungs

    prop.__name__ = f"{family.name}_claimed_sizes"
    # Two examples on the ci profile: each traces every ladder (every factor of 2 between
    # the small size and each claimed one), the claimed sizes once per run.
    prop.kh_example_fraction = 0.07
    return prop
