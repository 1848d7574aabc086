"""Counting the Pallas kernels in a traced program: the one module that knows how this jax
spells a kernel launch in a jaxpr and where its higher-order primitives keep their bodies.

A kernel is an equation of ``pallas_call_p`` (every Pallas backend: Mosaic TPU, Triton,
Mosaic GPU, both interpreters) or of ``core_map_p`` (``pl.core_map``/``pl.kernel``). Every
sub-jaxpr found in an equation's params is walked, closed or not, alone or in a tuple
(``jit``/``pjit``, ``custom_vjp_call``'s and ``custom_jvp_call``'s ``call_jaxpr``, ``cond``
branches (the fewest of them counts), ``while`` cond and body, ``scan``, ``shard_map``,
``checkpoint``...); a kernel's own body is not (kernels do not nest). ``custom_vjp`` and
``custom_jvp`` keep their rules as Python callables, not jaxprs: their backward appears in
the jaxpr of the vjp function once it is traced, which is how
:mod:`kernel_harness.run.kernel_count` counts it.

:func:`outside_ops` walks the same bodies (every ``cond`` branch) for the equations outside
every kernel body, with their sizes, for :mod:`kernel_harness.run.kernel_outside`; and
:func:`kernel_body_ops` the equations inside the kernels' bodies (a kernel's body is the
jaxpr in its equation's params; ``pl.when``'s ``cond``, loops and scoped allocations
inside it included), for what no kernel body may hold (a host callback that answers).

An equation of a known higher-order primitive that carries no jaxpr, or any equation whose
params hold a traced-function object (``linear_util.WrappedFun``) and no jaxpr, is a
:class:`KernelCountLayoutError`: a kernel could hide there, so it is never counted as none.
"""

from __future__ import annotations

import collections
import dataclasses
import math
from collections.abc import Iterator
from typing import Any

import jax


class KernelCountLayoutError(RuntimeError):
    """This jax's jaxprs are not laid out as the kernel counter knows (a primitive moved, a
    higher-order primitive keeps its body somewhere new): counting would be a guess."""

    def __init__(self, missing: str):
        super().__init__(
            f"jax {jax.__version__}: cannot count Pallas kernels ({missing}); the harness "
            "knows jax 0.10.x. Adapt kernel_harness/core/compat/pallas_count.py to this jax."
        )
        self.missing = missing


#: Primitives whose equations must carry at least one sub-jaxpr (by name, as jax 0.10 and
#: 0.12 spell them).
HIGHER_ORDER: frozenset[str] = frozenset({
    "jit", "pjit", "closed_call", "core_call", "remat", "checkpoint", "cond", "while", "scan",
    "custom_vjp_call", "custom_vjp_call_jaxpr", "custom_jvp_call", "shard_map", "xla_pmap",
    "run_state", "custom_lin", "linear_call", "custom_transpose_call",
})

#: Structural primitives left out of "what ran instead" (their bodies are listed instead).
_STRUCTURAL = HIGHER_ORDER


def _internals() -> tuple[Any, ...]:
    try:
        from jax._src import core
        from jax._src import linear_util as lu
        from jax._src.pallas import core as pallas_core
        from jax._src.pallas import pallas_call
    except ImportError as e:
        raise KernelCountLayoutError(f"cannot import an internal module: {e}") from None
    kernel_prims = tuple(p for p in (getattr(pallas_call, "pallas_call_p", None),
                                     getattr(pallas_core, "core_map_p", None)) if p is not None)
    if not kernel_prims or getattr(pallas_call, "pallas_call_p", None) is None:
        raise KernelCountLayoutError("jax._src.pallas.pallas_call has no pallas_call_p")
    jaxpr_types = tuple(t for t in (getattr(core, "Jaxpr", None),
                                    getattr(core, "ClosedJaxpr", None)) if t is not None)
    if not jaxpr_types or getattr(lu, "WrappedFun", None) is None:
        raise KernelCountLayoutError("jax._src.core.Jaxpr or linear_util.WrappedFun is missing")
    return kernel_prims, jaxpr_types, lu.WrappedFun


def kernel_primitives() -> tuple[Any, ...]:
    """The primitives whose equations launch a Pallas kernel (``pallas_call_p``, and
    ``core_map_p`` where this jax has it)."""
    return _internals()[0]


def _open(jaxpr: Any, jaxpr_types: tuple[type, ...]) -> Any:
    """The open jaxpr (with ``eqns``) of a Jaxpr or a ClosedJaxpr."""
    inner = getattr(jaxpr, "jaxpr", jaxpr)
    if not hasattr(inner, "eqns"):
        raise KernelCountLayoutError(f"{type(jaxpr).__name__} has no eqns")
    return inner


def _subjaxprs(value: Any, jaxpr_types: tuple[type, ...]) -> Iterator[Any]:
    if isinstance(value, jaxpr_types):
        yield value
    elif isinstance(value, tuple | list):
        for v in value:
            yield from _subjaxprs(v, jaxpr_types)


def _children(eqn: Any, jaxpr_types: tuple[type, ...], wrapped_fun: type) -> list[Any]:
    """The sub-jaxprs of a (non-kernel) equation; a layout error where one should be and
    is not (a known higher-order primitive, or a traced-function object, without one)."""
    name = eqn.primitive.name
    if name == "cond":
        subs = list(_subjaxprs(eqn.params.get("branches"), jaxpr_types))
        if not subs:
            raise KernelCountLayoutError("cond carries no 'branches' jaxprs")
        return subs
    subs = [s for v in eqn.params.values() for s in _subjaxprs(v, jaxpr_types)]
    if not subs and (name in HIGHER_ORDER or
                     any(isinstance(v, wrapped_fun) for v in eqn.params.values())):
        raise KernelCountLayoutError(
            f"primitive {name!r} carries no jaxpr in its params {sorted(eqn.params)}")
    return subs


def _walk(jaxpr: Any, counts: collections.Counter) -> int:
    """Kernels every path through ``jaxpr`` launches (a ``cond`` adds its branches' fewest),
    noting the other primitives met in ``counts``."""
    kernel_prims, jaxpr_types, wrapped_fun = _internals()
    kernels = 0
    for eqn in _open(jaxpr, jaxpr_types).eqns:
        if eqn.primitive in kernel_prims:
            kernels += 1
            continue
        name = eqn.primitive.name
        subs = _children(eqn, jaxpr_types, wrapped_fun)
        if name == "cond":
            kernels += min(_walk(b, counts) for b in subs)
            continue
        if name not in _STRUCTURAL:
            counts[name] += 1
        kernels += sum(_walk(sub, counts) for sub in subs)
    return kernels


def pallas_kernels(jaxpr: Any) -> int:
    """The Pallas kernel launches in ``jaxpr`` (a Jaxpr or ClosedJaxpr, e.g. of
    ``jax.make_jaxpr``) that every path runs, every sub-jaxpr included: a ``cond`` counts
    its branch with the fewest (a kernel in one branch only may not run), a loop body once
    (a static count: a ``while`` that runs no trip is not told apart)."""
    return _walk(jaxpr, collections.Counter())


def primitive_counts(jaxpr: Any) -> collections.Counter:
    """How often each non-structural primitive occurs in ``jaxpr`` and its sub-jaxprs,
    outside every kernel body, by name."""
    counts: collections.Counter = collections.Counter()
    _walk(jaxpr, counts)
    return counts


def top_primitives(jaxpr: Any, n: int = 5) -> tuple[str, ...]:
    """The ``n`` most frequent non-structural primitives of ``jaxpr`` and its sub-jaxprs,
    as ``name x count`` (what a pass ran when it ran no kernel)."""
    return tuple(f"{name} x{k}" if k > 1 else name
                 for name, k in primitive_counts(jaxpr).most_common(n))


@dataclasses.dataclass(frozen=True)
class OutsideOp:
    """One equation of a traced program outside every Pallas kernel.

    Attributes:
      name: its primitive's name (``exp``, ``dot_general``, ``pure_callback``...).
      elements: the elements of its largest operand or result, times the trips of the
        ``scan`` loops around it and the shards of the ``shard_map`` bodies around it (a
        body's shapes are one trip's, one shard's).
      inexact: whether some operand is floating.
      unbounded: whether it sits in a ``while`` loop (its trips are not static).
      cast_to: for ``convert_element_type``, the dtype it casts to (else None).
      chooses: for ``select_n``, whether two or more of its cases are computed arrays
        (not a literal or a broadcast scalar): a choice between values, where
        ``where(mask, x, 0)`` only masks (megablox zeroes the rows outside its groups so).
    """

    name: str
    elements: int
    inexact: bool
    unbounded: bool
    cast_to: Any = None
    chooses: bool = False


def _elements(aval: Any) -> int:
    shape = getattr(aval, "shape", None)
    return math.prod(shape) if shape is not None else 0


def floating(dtype: Any) -> bool:
    """Whether ``dtype`` (None: no dtype) is floating or complex; an extended dtype (a PRNG
    key) is not arithmetic."""
    try:
        return dtype is not None and bool(jax.numpy.issubdtype(dtype, jax.numpy.inexact))
    except TypeError:
        return False


def _floating(aval: Any) -> bool:
    return floating(getattr(aval, "dtype", None))


def _trips(eqn: Any) -> int:
    """How many times one trace of ``eqn``'s bodies runs per run of ``eqn`` (a ``while``:
    1, its equations are marked unbounded instead)."""
    name = eqn.primitive.name
    if name == "scan":
        return int(eqn.params["length"])
    if name == "shard_map":
        mesh = eqn.params.get("mesh")
        shape = getattr(mesh, "shape", None)
        if not hasattr(shape, "values"):
            raise KernelCountLayoutError("shard_map's 'mesh' param has no axis sizes")
        return math.prod(shape.values())
    return 1


#: Primitives whose result is a scalar's value spread or cast when their operand is one.
_SCALAR_KEEPING = frozenset({"broadcast_in_dim", "convert_element_type", "reshape",
                             "squeeze", "expand_dims"})


def _scalar(var: Any, scalars: set[Any]) -> bool:
    """Whether ``var`` is a literal, holds one element, or is one spread (``scalars``)."""
    if hasattr(var, "val"):  # a Literal
        return True
    return _elements(var.aval) <= 1 or var in scalars


def outside_ops(jaxpr: Any) -> list[OutsideOp]:
    """Every non-structural equation of ``jaxpr`` and its sub-jaxprs (every ``cond``
    branch, loop bodies, ``custom_vjp``/``custom_jvp`` bodies, ``shard_map``...) that is not
    inside a Pallas kernel's body: the arithmetic the program does outside its kernels."""
    kernel_prims, jaxpr_types, wrapped_fun = _internals()
    found: list[OutsideOp] = []

    def walk(j: Any, trips: int, unbounded: bool, spread: frozenset[int] = frozenset()
             ) -> None:
        # vars holding a scalar, broadcast or cast (``spread``: the positions of the body's
        # inputs its caller passed one to, as ``jnp.where`` passes its zeros to its jit)
        opened = _open(j, jaxpr_types)
        scalars: set[Any] = {v for i, v in enumerate(opened.invars) if i in spread}
        for eqn in opened.eqns:
            if eqn.primitive in kernel_prims:
                continue
            name = eqn.primitive.name
            subs = _children(eqn, jaxpr_types, wrapped_fun)
            if name in _SCALAR_KEEPING and all(_scalar(v, scalars) for v in eqn.invars):
                scalars.update(eqn.outvars)
            if name not in _STRUCTURAL:
                avals = [v.aval for v in (*eqn.invars, *eqn.outvars)]
                found.append(OutsideOp(
                    name=name, elements=trips * max(map(_elements, avals), default=0),
                    inexact=any(_floating(v.aval) for v in eqn.invars),
                    unbounded=unbounded, cast_to=eqn.params.get("new_dtype")
                    if name == "convert_element_type" else None,
                    chooses=name == "select_n" and sum(
                        not _scalar(v, scalars) for v in eqn.invars[1:]) >= 2))
            inner = trips * _trips(eqn)
            passed = frozenset(i for i, v in enumerate(eqn.invars)
                               if subs and _scalar(v, scalars))
            for sub in subs:
                same = len(_open(sub, jaxpr_types).invars) == len(eqn.invars)
                walk(sub, inner, unbounded or name == "while",
                     passed if same else frozenset())

    walk(jaxpr, 1, False)
    return found


def float_casts(jaxpr: Any) -> frozenset[Any]:
    """The floating dtypes ``convert_element_type`` casts to in ``jaxpr`` and its
    sub-jaxprs, outside every kernel body (:func:`outside_ops`)."""
    return frozenset(jax.numpy.dtype(op.cast_to) for op in outside_ops(jaxpr)
                     if op.cast_to is not None
                     and jax.numpy.issubdtype(op.cast_to, jax.numpy.floating))


@dataclasses.dataclass(frozen=True)
class BodyOp:
    """One equation inside a Pallas kernel's body.

    Attributes:
      name: its primitive's name (``pure_callback``, ``debug_callback``, ``dot_general``...).
      results: how many values it returns to the kernel (0 for ``jax.debug.print`` and
        ``jax.debug.callback``: they only observe).
    """

    name: str
    results: int


def kernel_body_ops(jaxpr: Any) -> list[BodyOp]:
    """Every non-structural equation inside the body of every Pallas kernel that ``jaxpr``
    launches, wherever the kernel sits (``jit``, every ``cond`` branch, loops,
    ``custom_vjp``/``custom_jvp`` bodies, ``shard_map``...), the body's own ``cond``
    (``pl.when``), loops and scoped regions included."""
    found: list[BodyOp] = []

    def inside(j: Any) -> None:
        for eqn in equations(j):
            subs = sub_jaxprs(eqn)
            if eqn.primitive.name not in _STRUCTURAL:
                found.append(BodyOp(name=eqn.primitive.name, results=len(eqn.outvars)))
            for sub in subs:
                inside(sub)

    for kernel in kernel_equations(jaxpr):
        for body in sub_jaxprs(kernel):
            inside(body)
    return found


def equations(jaxpr: Any) -> list[Any]:
    """The equations of a Jaxpr or ClosedJaxpr (its own, not its sub-jaxprs')."""
    return list(_open(jaxpr, _internals()[1]).eqns)


def sub_jaxprs(eqn: Any) -> list[Any]:
    """The jaxprs an equation holds: a kernel's body, or a higher-order primitive's
    bodies (every ``cond`` branch); a layout error where one should be and is not."""
    kernel_prims, jaxpr_types, wrapped_fun = _internals()
    if eqn.primitive in kernel_prims:
        bodies = [s for v in eqn.params.values() for s in _subjaxprs(v, jaxpr_types)]
        if not bodies:
            raise KernelCountLayoutError(
                f"kernel primitive {eqn.primitive.name!r} carries no body jaxpr in its "
                f"params {sorted(eqn.params)}")
        return bodies
    return _children(eqn, jaxpr_types, wrapped_fun)


def kernel_equations(jaxpr: Any) -> list[Any]:
    """Every kernel equation ``jaxpr`` launches, in program order, every sub-jaxpr walked
    (both branches of a ``cond``, loop bodies once), kernel bodies not entered."""
    kernel_prims = kernel_primitives()
    found: list[Any] = []

    def walk(j: Any) -> None:
        for eqn in equations(j):
            if eqn.primitive in kernel_prims:
                found.append(eqn)
            else:
                for sub in sub_jaxprs(eqn):
                    walk(sub)

    walk(jaxpr)
    return found


def caller_traceback() -> Any:
    """The traceback jax would give an equation traced here (an opaque jax object), to
    trace a second time as if from here (:func:`traced_from`)."""
    try:
        from jax._src import source_info_util
    except ImportError as e:
        raise KernelCountLayoutError(f"cannot import an internal module: {e}") from None
    return source_info_util.current().traceback


def traced_from(traceback: Any) -> Any:
    """A context in which every equation traced carries ``traceback``.

    Tracing an implementation again to count its kernels fills jax's trace caches (a
    jitted kernel reached first by the count, e.g. a backward one) with equations whose
    source is the count's own stack, cut short inside the harness; the real run then
    reuses them, and a kernel's accesses would be attributed to the harness instead of the
    adapter's call. Traced from the real call's traceback, they read as the real call's."""
    from jax._src import source_info_util

    return source_info_util.user_context(traceback)
