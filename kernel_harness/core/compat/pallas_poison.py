"""Evaluating a traced program with every Pallas kernel's result replaced by a fill: the one
module that knows how to rebuild this jax's jaxprs around the kernels.

:func:`evaluate` runs a jaxpr (e.g. of ``jax.make_jaxpr``) on arguments (concrete, or
tracers of the caller's ``jax.jit``), equation by equation, except that each ``pallas_call``
is not run: its outputs are a fill (:func:`fill`), one of two fixed, non-constant patterns
chosen by ``which``. Call-like
primitives (``jit``/``pjit``, ``closed_call``, ``checkpoint``, ``custom_jvp_call``,
``custom_vjp_call``: only their primal body is evaluated, nothing is differentiated) are
evaluated inline; ``cond`` branches, ``while`` cond and body and ``scan`` bodies are traced
again with their kernels filled (``jax.make_jaxpr``) and bound as before, so only the
branches and trips the data selects run; a ``shard_map`` body is evaluated per shard under
``jax.shard_map`` with the equation's mesh and specs. An equation whose params hold no
kernel is bound unchanged.

Two finite fills, not NaN: ``0 * kernel + xla`` is NaN under a NaN fill (it "changes") yet
ignores the kernel; under two fills it is the same both times. Non-constant, so that a
wrapper normalizing a kernel's partial result does not cancel the fill.

A kernel inside any other higher-order primitive (``run_state``, ``xla_pmap``...), or a
``core_map`` kernel (it writes through refs, it has no result to replace), is a
:class:`PoisonLayoutError` naming the jax version: never a quiet evaluation that left a
kernel running.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import core as jex_core

from kernel_harness.core.compat import pallas_count

#: Call-like primitives evaluated inline, and the param holding their body.
_INLINE = {"jit": "jaxpr", "pjit": "jaxpr", "closed_call": "call_jaxpr",
           "core_call": "call_jaxpr", "checkpoint": "jaxpr", "remat": "jaxpr", "remat2": "jaxpr",
           "custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr",
           "custom_vjp_call_jaxpr": "fun_jaxpr"}
#: Control-flow primitives rebound with their bodies (params) filled.
_REBIND = {"cond": ("branches",), "while": ("cond_jaxpr", "body_jaxpr"), "scan": ("jaxpr",)}


class PoisonLayoutError(RuntimeError):
    """This jax keeps a kernel where the poisoning evaluator cannot replace its result."""

    def __init__(self, missing: str):
        super().__init__(
            f"jax {jax.__version__}: cannot evaluate the program with its Pallas kernels' "
            f"results replaced ({missing}); the harness knows jax 0.10.x and 0.12.x. Adapt "
            "kernel_harness/core/compat/pallas_poison.py to this jax.")
        self.missing = missing


def fill(shape: Sequence[int], dtype: Any, which: int) -> np.ndarray:
    """Fill ``which`` (0 or 1) of a kernel result: elementwise different from the other
    fill everywhere, neither constant (floats ``1 + (i % 5) / 4`` and ``1.125 + (i % 3) / 2``,
    exact down to bfloat16; integers ``1 + i % 5`` and ``7 + i % 3``; booleans alternating).
    A numpy array: made on the host, it costs no compile per shape."""
    i = np.arange(math.prod(shape), dtype=np.int32).reshape(tuple(shape))
    dtype = jnp.dtype(dtype)
    if dtype == jnp.bool_:
        return (i % 2 == 0) ^ bool(which)
    if jnp.issubdtype(dtype, jnp.inexact):
        pattern = 1.125 + (i % 3) * 0.5 if which else 1.0 + (i % 5) * 0.25
    elif jnp.issubdtype(dtype, jnp.integer):
        pattern = 7 + i % 3 if which else 1 + i % 5
    else:
        raise PoisonLayoutError(f"a kernel result of dtype {dtype} cannot be filled")
    return pattern.astype(dtype)


def _open(jaxpr: Any) -> tuple[Any, Sequence[Any]]:
    """(open jaxpr, its consts) of a Jaxpr or ClosedJaxpr."""
    if isinstance(jaxpr, jex_core.ClosedJaxpr):
        return jaxpr.jaxpr, jaxpr.consts
    if isinstance(jaxpr, jex_core.Jaxpr):
        return jaxpr, ()
    raise PoisonLayoutError(f"{type(jaxpr).__name__} is not a jaxpr")


def _has_kernel(value: Any) -> bool:
    """Whether a param value (a jaxpr, or a tuple of them) holds a kernel, at any depth."""
    kernel_prims = pallas_count.kernel_primitives()
    if isinstance(value, tuple | list):
        return any(_has_kernel(v) for v in value)
    if not isinstance(value, jex_core.ClosedJaxpr | jex_core.Jaxpr):
        return False
    for eqn in _open(value)[0].eqns:
        if eqn.primitive in kernel_prims or any(_has_kernel(v) for v in eqn.params.values()):
            return True
    return False


def evaluate(jaxpr: Any, args: Sequence[Any], which: Any, consts: Sequence[Any] | None = None,
             body: Callable[[Any], Any] | None = None) -> list[Any]:
    """``jaxpr`` (a Jaxpr or ClosedJaxpr) applied to ``args``, every Pallas kernel's result
    replaced by :func:`fill` ``which`` (or, ``which`` a callable, by ``which(inputs, result
    avals, equation)``: a stand-in for the kernel, which runs where that returns None);
    ``consts`` replaces a ClosedJaxpr's own (a backward jaxpr whose consts were the
    residuals of another trace). With ``body``, the kernels run
    instead, each ``pallas_call`` with its kernel body replaced by ``body(its params)``."""
    kernel_prims = pallas_count.kernel_primitives()
    open_jaxpr, own = _open(jaxpr)
    env: dict[Any, Any] = {}

    def read(v: Any) -> Any:
        return v.val if isinstance(v, jex_core.Literal) else env[v]

    for var, val in zip(open_jaxpr.constvars, own if consts is None else consts, strict=True):
        env[var] = val
    for var, val in zip(open_jaxpr.invars, args, strict=True):
        env[var] = val
    for eqn in open_jaxpr.eqns:
        invals = [read(v) for v in eqn.invars]
        if eqn.primitive in kernel_prims:
            if eqn.primitive.name != "pallas_call":
                raise PoisonLayoutError(f"a {eqn.primitive.name} kernel has no result to fill")
            if body is not None:
                params = dict(eqn.params, jaxpr=body(eqn.params))
                outs = list(eqn.primitive.bind(*invals, **params))
            elif callable(which):  # a stand-in computing the results from the inputs
                stood = which(invals, [v.aval for v in eqn.outvars], eqn)
                # None: the stand-in leaves this kernel to run.
                outs = list(eqn.primitive.bind(*invals, **eqn.params) if stood is None
                            else stood)
            else:
                outs = [fill(v.aval.shape, v.aval.dtype, which) for v in eqn.outvars]
        else:
            outs = _equation(eqn, invals, which, body)
        for var, val in zip(eqn.outvars, outs, strict=True):
            if not isinstance(var, jex_core.DropVar):
                env[var] = val
    return [read(v) for v in open_jaxpr.outvars]


def _equation(eqn: Any, invals: list[Any], which: Any, body: Any) -> list[Any]:
    name = eqn.primitive.name
    if not any(_has_kernel(v) for v in eqn.params.values()):
        # As jax's own evaluator binds (custom derivatives keep their rules in params it
        # rewrites for bind).
        out = eqn.primitive.bind(*invals, **eqn.primitive.get_bind_params(eqn.params))
        return list(out) if eqn.primitive.multiple_results else [out]
    if name in _INLINE and _INLINE[name] in eqn.params:
        return evaluate(eqn.params[_INLINE[name]], invals, which, body=body)
    if name in _REBIND and all(k in eqn.params for k in _REBIND[name]):
        params = dict(eqn.params)
        for key in _REBIND[name]:
            value = params[key]
            params[key] = (tuple(_refilled(b, which, body) for b in value)
                           if isinstance(value, tuple | list) else _refilled(value, which, body))
        return list(eqn.primitive.bind(*invals, **params))
    if name == "shard_map" and {"jaxpr", "mesh", "in_specs", "out_specs"} <= set(eqn.params):
        return _shard_map(eqn.params, invals, which, body)
    raise PoisonLayoutError(
        f"a Pallas kernel inside primitive {name!r} (params {sorted(eqn.params)})")


def _shard_map(params: dict[str, Any], invals: list[Any], which: Any, body: Any
               ) -> list[Any]:
    """A ``shard_map`` body evaluated per shard by ``jax.shard_map`` itself (its
    collectives need the mesh's axes bound: the body cannot be traced alone)."""
    inner = params["jaxpr"]
    axes = params.get("newly_manual_axes") or params.get("axis_names")
    options = {"axis_names": set(axes)} if axes else {}
    fn = jax.shard_map(lambda *a: tuple(evaluate(inner, a, which, body=body)),
                       mesh=params["mesh"],
                       in_specs=tuple(params["in_specs"]),
                       out_specs=tuple(params["out_specs"]),
                       check_vma=params.get("check_vma", True), **options)
    return list(fn(*invals))


def _refilled(closed: Any, which: Any, body: Any = None) -> Any:
    """``closed`` (a ClosedJaxpr) traced again with its kernels' results filled (with
    ``body``: its kernels' bodies replaced)."""
    if not _has_kernel(closed):
        return closed
    if not isinstance(closed, jex_core.ClosedJaxpr):
        raise PoisonLayoutError(f"a control-flow body is a {type(closed).__name__}")
    avals = [jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=getattr(a, "weak_type", False))
             for a in closed.in_avals]
    # A stand-in that records what its kernels were handed records only at the top level
    # (``nested``: the variant for a body traced apart, whose values cannot leave it).
    inner = getattr(which, "nested", which)
    new = jax.make_jaxpr(lambda *a: evaluate(closed, a, inner, body=body))(*avals)
    if [(a.shape, a.dtype) for a in new.out_avals] != [
            (a.shape, a.dtype) for a in closed.out_avals]:
        raise PoisonLayoutError("a control-flow body changed type once its kernels were filled")
    return new
