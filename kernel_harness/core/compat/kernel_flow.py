"""What reaches a traced program's outputs from inside its Pallas kernels: the one module
that follows values through this jax's jaxprs, kernel bodies and their refs included.

A copy kernel (its body only moves what XLA computed, or what a host callback fetched) runs
as many kernels as the real one, and its result is the answer: poisoning
(:mod:`kernel_harness.core.compat.pallas_poison`) cannot tell them apart, and math spelled
with primitives the outside measure does not list (folds of adds, a polynomial ``exp``, a
Newton reciprocal) escapes that measure. So a family declares the op's core primitives its
kernels compute (``exp|exp2``, ``dot_general``...: :class:`~kernel_harness.records.kernels.
KernelExpectation`), and :func:`reach` says, per output of the program, which of them some
kernel computes into it: a primitive's result, inside a kernel body, flows into one of the
kernel's output refs, and that kernel result flows on to the program's output.

The flow is a taint analysis, conservative where it cannot be exact (it over-approximates:
a pristine kernel is never failed by it):

- an equation with a tainted operand taints its results and every ref it takes (a ``swap``
  into a ref, an ``addupdate``, a DMA from a tainted ref into another);
- reading a tainted ref (``get``) taints the value read;
- inside a kernel body, an equation of a declared primitive is a source;
- a ``pallas_call``'s body is entered with its tainted inputs; its result ``k`` is tainted
  when the body's output ref ``k`` is (the body's refs: scalar-prefetch operands, inputs,
  outputs, scratch, as its ``grid_mapping`` counts them);
- nested jaxprs are followed with their operands mapped (``cond`` branches, ``scan`` and
  ``while`` with their carries fed back to a fixed point, ``jit``/``pjit``, custom
  derivatives' primal bodies, ``run_scoped``'s closed-over refs); any other nested body is
  entered whole: everything it may write is tainted if anything tainted or any source is in
  it.

What it cannot see: arithmetic that cancels a value (``0 * exp(x)``, ``e - e``) still
"reaches". Poisoning and the comparison with the reference judge values; this judges where
the op's math is computed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from jax.extend import core as jex_core

from kernel_harness.core.compat import pallas_count

#: Sources that are every Pallas kernel's results (not a primitive inside a body).
KERNEL_RESULTS = frozenset({"<kernel results>"})


def _open(jaxpr: Any) -> Any:
    return getattr(jaxpr, "jaxpr", jaxpr)


def _var(v: Any) -> bool:
    return not isinstance(v, jex_core.Literal)


def _is_ref(v: Any) -> bool:
    return _var(v) and type(getattr(v, "aval", None)).__name__ == "AbstractRef"


def _subs(eqn: Any) -> list[Any]:
    return [s for v in eqn.params.values() for s in _jaxprs(v)]


def _jaxprs(value: Any) -> Iterable[Any]:
    if isinstance(value, jex_core.ClosedJaxpr | jex_core.Jaxpr):
        yield value
    elif isinstance(value, tuple | list):
        for v in value:
            yield from _jaxprs(v)


def _contains(jaxpr: Any, sources: frozenset[str]) -> bool:
    """Whether a source primitive (or, for :data:`KERNEL_RESULTS`, a kernel) is anywhere in
    ``jaxpr``, kernel bodies included (inside a kernel or not: an over-approximation)."""
    kernels = pallas_count.kernel_primitives()
    for eqn in _open(jaxpr).eqns:
        if eqn.primitive.name in sources or (sources is KERNEL_RESULTS
                                             and eqn.primitive in kernels):
            return True
        if any(_contains(s, sources) for s in _subs(eqn)):
            return True
    return False


def _run(jaxpr: Any, tainted_in: set[int], sources: frozenset[str], in_kernel: bool,
         tainted_consts: set[int] = frozenset(), readers: _Readers | None = None
         ) -> tuple[set[int], set[int], set[int]]:
    """Follows taint through ``jaxpr`` from its invars ``tainted_in`` (and constvars
    ``tainted_consts``) to a fixed point: ``(invars, constvars, outvars)`` tainted at the
    end (a ref among the invars is tainted when something tainted was written into it);
    ``readers``: notes the equations outside the kernels that read a tainted value."""
    j = _open(jaxpr)
    t = {j.invars[i] for i in tainted_in} | {j.constvars[i] for i in tainted_consts}
    changed = True
    while changed:
        changed = False
        for eqn in j.eqns:
            new = _equation(eqn, t, sources, in_kernel, readers) - t
            if new:
                t |= new
                changed = True
    return ({i for i, v in enumerate(j.invars) if v in t},
            {i for i, v in enumerate(j.constvars) if v in t},
            {i for i, v in enumerate(j.outvars) if _var(v) and v in t})


def _written(eqn: Any, ins: Iterable[int] = (), outs: Iterable[int] = ()) -> set[Any]:
    """The equation's invars ``ins`` that are refs and its outvars ``outs`` (no DropVar)."""
    got = {eqn.invars[i] for i in ins if _is_ref(eqn.invars[i])}
    return got | {eqn.outvars[i] for i in outs
                  if not isinstance(eqn.outvars[i], jex_core.DropVar)}


def _everything(eqn: Any) -> set[Any]:
    return _written(eqn, range(len(eqn.invars)), range(len(eqn.outvars)))


def _equation(eqn: Any, t: set[Any], sources: frozenset[str], in_kernel: bool,
              readers: _Readers | None = None) -> set[Any]:
    """What ``eqn`` taints, given the tainted vars ``t``."""
    tin = {i for i, v in enumerate(eqn.invars) if _var(v) and v in t}
    name = eqn.primitive.name
    if eqn.primitive in pallas_count.kernel_primitives():
        return _kernel(eqn, tin, sources)
    subs = _subs(eqn)
    if not subs:
        if readers is not None and tin:
            readers.note(eqn, tin)
        hit = bool(tin) or (in_kernel and name in sources)
        return _everything(eqn) if hit else set()
    if name == "cond":
        if 0 in tin:  # the branch taken depends on a tainted value
            if readers is not None:
                readers.found.add(name)
            return _everything(eqn)
        return _mapped(eqn, subs, {i - 1 for i in tin if i}, 1, sources, in_kernel, readers)
    if name in ("scan", "while"):
        return _loop(eqn, tin, sources, in_kernel, readers)
    return _mapped(eqn, subs, tin, 0, sources, in_kernel, readers)


def _mapped(eqn: Any, subs: Sequence[Any], tin: set[int], offset: int,
            sources: frozenset[str], in_kernel: bool, readers: _Readers | None = None
            ) -> set[Any]:
    """Each sub-jaxpr entered with its operands ``eqn.invars[offset:]`` (as its invars, or,
    for an open jaxpr closing over them such as ``run_scoped``'s, its constvars); its
    results as the equation's. A layout that does not match is entered whole."""
    n = len(eqn.invars) - offset
    found: set[Any] = set()
    for sub in subs:
        j = _open(sub)
        if len(j.invars) == n and len(j.outvars) == len(eqn.outvars):
            ins, _, outs = _run(sub, tin, sources, in_kernel, readers=readers)
            found |= _written(eqn, (i + offset for i in ins), outs)
        elif len(j.constvars) == n and not j.outvars and not eqn.outvars:
            _, consts, _ = _run(sub, set(), sources, in_kernel, tainted_consts=tin,
                                readers=readers)
            found |= _written(eqn, (i + offset for i in consts))
        elif tin or _contains(sub, sources):
            if readers is not None and tin:
                readers.found.add(eqn.primitive.name)  # a body not followed: read whole
            found |= _everything(eqn)
    return found


def _loop(eqn: Any, tin: set[int], sources: frozenset[str], in_kernel: bool,
          readers: _Readers | None = None) -> set[Any]:
    """``scan`` (operands: consts, carry, xs; results: carry, ys) or ``while`` (operands:
    cond consts, body consts, carry; results: carry): the body's carry fed back to a fixed
    point."""
    p = eqn.params
    if eqn.primitive.name == "scan":
        body, skip = p["jaxpr"], 0
        nconst, ncarry = _scan_counts(p)
    else:
        body, skip, nconst = p["body_jaxpr"], p["cond_nconsts"], p["body_nconsts"]
        ncarry = len(eqn.outvars)
    if nconst is None or ncarry is None:  # a layout not known here: entered whole
        return _mapped(eqn, [body], tin, 0, sources, in_kernel, readers) if tin or _contains(
            body, sources) else set()
    body_in = {i - skip for i in tin if i >= skip}
    while True:
        ins, _, outs = _run(body, body_in, sources, in_kernel, readers=readers)
        fed = {nconst + i for i in outs if i < ncarry}
        if fed <= body_in:
            break
        body_in |= fed
    if readers is not None and eqn.primitive.name == "while":
        # how long it loops: its cond entered with its consts and the tainted carry
        carry = {skip + i - nconst for i in body_in if i >= nconst}
        _run(p["cond_jaxpr"], {i for i in tin if i < skip} | carry, sources, in_kernel,
             readers=readers)
    return _written(eqn, (i + skip for i in ins | body_in), outs)


def _scan_counts(params: dict[str, Any]) -> tuple[int | None, int | None]:
    """A ``scan``'s constants and carries among its operands: ``num_consts``/``num_carry``
    (jax 0.10), or the ``Right`` leaves of ``ft_in``'s constants and carry (jax 0.12, where
    a ``Left`` leaf is a value forwarded around the loop, not an operand)."""
    if "num_consts" in params and "num_carry" in params:
        return params["num_consts"], params["num_carry"]
    ft = params.get("ft_in")
    if not isinstance(ft, tuple) or len(ft) != 3:
        return None, None

    def rights(leaves: Any) -> int | None:
        names = [repr(x) for x in leaves]
        if not all("Right(" in n or "Left(" in n for n in names):
            return None
        return sum("Right(" in n for n in names)

    return rights(ft[0]), rights(ft[1])


def _kernel(eqn: Any, tin: set[int], sources: frozenset[str]) -> set[Any]:
    """A kernel launch: its body entered with the tainted inputs, the primitives of
    ``sources`` inside it as sources; or, for :data:`KERNEL_RESULTS`, all its results."""
    if sources is KERNEL_RESULTS:
        return _everything(eqn)
    gm, body = eqn.params.get("grid_mapping"), eqn.params.get("jaxpr")
    counts = [getattr(gm, f, None) for f in ("num_dynamic_grid_bounds", "num_index_operands",
                                              "num_inputs", "num_outputs")]
    if eqn.primitive.name != "pallas_call" or body is None or None in counts:
        # A kernel whose refs cannot be told apart: anything it computes may be its result.
        hit = bool(tin) or any(_contains(s, sources) for s in _subs(eqn))
        return _everything(eqn) if hit else set()
    dyn, idx, n_in, n_out = counts
    if any(i < dyn for i in tin):  # the grid itself depends on a tainted value
        return _everything(eqn)
    ins = _body_run(body, frozenset(i - dyn for i in tin), sources)
    first = idx + n_in
    return {eqn.outvars[k] for k in range(n_out) if first + k in ins
            and not isinstance(eqn.outvars[k], jex_core.DropVar)}


class _Readers:
    """The equations outside every kernel that read a tainted value (:func:`value_readers`)
    rather than only move it."""

    def __init__(self, moves: frozenset[str]) -> None:
        self.moves = moves
        self.found: set[str] = set()

    def note(self, eqn: Any, tin: set[int]) -> None:
        name = eqn.primitive.name
        if name not in self.moves or tin & _choosing(name, len(eqn.invars)):
            self.found.add(name)
        elif name == "convert_element_type" and not pallas_count.floating(
                eqn.params.get("new_dtype")):
            self.found.add(name)  # a cast to bits or integers reads the value


def _choosing(name: str, n: int) -> set[int]:
    """The positions among ``n`` operands of primitive ``name`` that choose rather than are
    moved: a ``select_n``'s predicate, a dynamic slice's or update's starts, a gather's or
    scatter's indices."""
    first = {"select_n": 0, "dynamic_slice": 1, "dynamic_update_slice": 2, "gather": 1,
             "scatter": 1, "scatter-add": 1}.get(name)
    if first is None:
        return set()
    return set(range(first, n)) if name.startswith("dynamic") else {first}


def value_readers(jaxpr: Any, moves: frozenset[str], *, integers: bool = False
                  ) -> frozenset[str]:
    """The primitives that, outside every Pallas kernel of ``jaxpr``, read a value derived
    from the program's floating inputs or from a kernel's results: any primitive not in
    ``moves`` (the caller's list of those that only move values), and of those a
    ``select_n`` whose predicate, a dynamic slice or update whose start, a gather or scatter
    whose indices are such a value, a cast of one to a non-floating dtype, a ``cond`` that
    branches on one. A wrapper that only lays out the kernel's operands and results reads
    none (round 13 of the adversarial set rolled the kernel's result by a shift read from
    the bits of x's first element). ``integers``: from the program's integer inputs (and
    the kernels' results) instead."""
    j = _open(jaxpr)
    readers = _Readers(moves)
    seeds = {i for i, v in enumerate(j.invars)
             if pallas_count.floating(getattr(v.aval, "dtype", None)) != integers}
    _run(jaxpr, seeds, KERNEL_RESULTS, False, readers=readers)
    return frozenset(readers.found)


#: Kernel bodies already followed, by (body, tainted inputs, sources): a body is entered
#: again at every pass of the fixed point around it, for every group and every program
#: (forward, joint) that holds it (splash's ci check: 15 s of its 124 s without this).
_BODIES: dict[tuple[int, frozenset[int], frozenset[str]], tuple[Any, set[int]]] = {}


def _body_run(body: Any, tin: frozenset[int], sources: frozenset[str]) -> set[int]:
    """The invars of kernel ``body`` tainted from ``tin`` (:func:`_run`), remembered."""
    key = (id(body), tin, sources)
    hit = _BODIES.get(key)
    if hit is None or hit[0] is not body:  # (the body kept alive: its id is not reused)
        if len(_BODIES) > 4096:
            _BODIES.clear()
        hit = _BODIES[key] = (body, _run(body, set(tin), sources, True)[0])
    return hit[1]


def reach(jaxpr: Any, groups: Sequence[frozenset[str]]) -> list[tuple[bool, tuple[bool, ...]]]:
    """Per output of ``jaxpr``: whether any Pallas kernel's result reaches it, and, per
    group of ``groups`` (alternative primitive names), whether a kernel computes one of
    them into its result on the way to that output."""
    outs = len(_open(jaxpr).outvars)
    kernel_reached = _run(jaxpr, set(), KERNEL_RESULTS, False)[2]
    per_group = [_run(jaxpr, set(), g, False)[2] for g in groups]
    return [(i in kernel_reached, tuple(i in g for g in per_group)) for i in range(outs)]
