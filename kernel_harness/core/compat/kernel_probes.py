"""Probes inside interpreted Pallas kernels: which branches a kernel really took.

The one module that knows how a ``pallas_call`` carries its kernel (the ``jaxpr`` param of
``pallas_call_p``), how its MLIR lowering is registered, and how jax records source lines.
While :func:`kernel_probes` is active, the lowering of every interpreted ``pallas_call`` is
wrapped: the kernel body jaxpr is re-traced through an evaluator that adds a
``jax.debug.callback`` probe after each

- ``cond`` (``pl.when``, ``lax.cond``, ``lax.switch``): the branch index;
- scalar comparison (``lt``/``le``/``gt``/``ge``/``eq``/``ne``): True or False (splash picks
  its partial-mask path by a ``bitwise_or`` of such a scalar, not by a ``cond``);
- ``select_n`` (``jnp.where``): all-false / all-true / mixed over the array;
- ``while`` (a traced-bound ``fori_loop``): 0, 1 or 2+ trips (an extra counter carry; the
  loop test itself carries no probes);

and then the original lowering runs on the instrumented body, so both interpreters
(``interpret=True`` and TPU interpret mode) execute the probes. Outputs are untouched: the
probes only read values. A compiled (non-interpreted) kernel is reported, not instrumented.

Each probe site is named by the kernel's own source line: the innermost frame outside
``jax/_src`` (splash, shipped in ``jax/experimental``, counts as kernel code); inside a nested
``jit`` the enclosing equation's line. Kernels traced during a transformation (splash's dq/dkv
kernels are traced in ``jax.vjp``'s backward pass under ``source_info_util.user_context``)
would all carry the outer call site, so while probes are on, ``user_context`` keeps the real
Python stack (this changes only source metadata, never a value).

A jax whose internals are laid out otherwise raises :class:`KernelProbeLayoutError` naming
the jax version and the missing piece.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import jax
import numpy as np

from kernel_harness.core.compat.kernel_eval import (
    KNOWN_JAX,
    WHILE_OUTCOMES,
    KernelProbeLayoutError,
    ProbeContext,
    ProbeSink,
    ProbeSite,
    instrument_open,
    rebinding,
)


def _internals() -> Any:
    """The jax internals used here, looked up once; a missing one is a layout error."""
    try:
        from jax._src import core, source_info_util
        from jax._src import linear_util as lu
        from jax._src.interpreters import mlir
        from jax._src.interpreters import partial_eval as pe
        from jax._src.pallas import pallas_call as pallas_call_mod
    except ImportError as e:
        raise KernelProbeLayoutError(f"cannot import an internal module: {e}") from None
    pieces = {
        "pallas_call.pallas_call_p": getattr(pallas_call_mod, "pallas_call_p", None),
        "mlir._lowerings": getattr(mlir, "_lowerings", None),
        "mlir.register_lowering": getattr(mlir, "register_lowering", None),
        "partial_eval.trace_to_jaxpr_dynamic": getattr(pe, "trace_to_jaxpr_dynamic", None),
        "linear_util.DebugInfo": getattr(lu, "DebugInfo", None),
        "source_info_util.UserContextManager": getattr(
            source_info_util, "UserContextManager", None),
        "core.Jaxpr": getattr(core, "Jaxpr", None),
        "core.ShapedArray": getattr(core, "ShapedArray", None),
    }
    missing = [k for k, v in pieces.items() if v is None]
    if missing:
        raise KernelProbeLayoutError(f"missing {missing}")
    if pieces["pallas_call.pallas_call_p"] not in mlir._lowerings:
        raise KernelProbeLayoutError("pallas_call_p has no registered MLIR lowering")
    # jax 0.10 wraps a jaxpr and its constants in a ClosedJaxpr; jax 0.12 has one Jaxpr
    # class carrying its constants (``Jaxpr(jaxpr, consts)`` still builds one).
    closed = getattr(core, "ClosedJaxpr", None)
    if closed is None and "_consts" not in getattr(core.Jaxpr, "__slots__", ()):
        raise KernelProbeLayoutError("no core.ClosedJaxpr and core.Jaxpr carries no constants")
    return dict(core=core, lu=lu, mlir=mlir, pe=pe, siu=source_info_util,
                prim=pallas_call_mod.pallas_call_p,
                closed_types=(closed,) if closed is not None else (core.Jaxpr,),
                open_types=(core.Jaxpr,) if closed is not None else (),
                close=closed if closed is not None else core.Jaxpr)


# --- the lowering wrapper -------------------------------------------------------------------

_LOCK = threading.RLock()
_ACTIVE: list[Any] = []


def _kernel_name(jaxpr: Any, params: dict[str, Any]) -> tuple[str, str]:
    """``(body function, file)`` of a pallas_call's kernel. The jaxpr's ``func_src_info``
    reads ``NAME at FILE:LINE``; NAME is the pallas_call's ``name=`` when given (splash
    names each variant, ``splash_mha_fwd_segmented_residuals``), so the function defined
    at FILE:LINE names the kernel: all variants of one body share their sites."""
    import linecache
    import re

    info = getattr(jaxpr, "debug_info", None)
    src = getattr(info, "func_src_info", None) or ""
    func = src.split(" ", 1)[0] if src else str(params.get("name") or "<kernel>")
    if " at " not in src:
        return func, ""
    file, _, line = src.rsplit(" at ", 1)[1].rpartition(":")
    for n in range(int(line), int(line) + 8) if line.isdigit() else ():  # past decorators
        m = re.match(r"\s*(?:async\s+)?def\s+(\w+)", linecache.getline(file, n))
        if m:
            return m.group(1), file
    return func, file


def _wrapped_lowering(jx: dict[str, Any], original: Callable[..., Any],
                      sink: ProbeSink, hit: Callable[..., None]) -> Callable[..., Any]:
    def lowering(lctx: Any, *in_nodes: Any, **params: Any) -> Any:
        if "jaxpr" not in params or "interpret" not in params:
            raise KernelProbeLayoutError(
                f"pallas_call params {sorted(params)} lack 'jaxpr' or 'interpret'")
        if id(params["jaxpr"]) in _PERTURBED:  # the harness's own re-run: not the kernel's
            return original(lctx, *in_nodes, **params)
        kernel, file = _kernel_name(params["jaxpr"], params)
        if not params["interpret"]:
            sink.uninstrumented(kernel, "compiled, not interpreted: no probes")
            return original(lctx, *in_nodes, **params)
        trace_env = getattr(params.get("grid_mapping"), "trace_env", None)
        if trace_env is None:
            raise KernelProbeLayoutError("pallas_call's grid_mapping has no trace_env()")
        ctx = ProbeContext(jx=jx, sink=sink, kernel=kernel, kernel_file=file, hit=hit)
        with trace_env():
            params = dict(params, jaxpr=instrument_open(ctx, params["jaxpr"], "pallas_call"))
        sink.instrumented(kernel)
        return original(lctx, *in_nodes, **params)

    return lowering


def _real_stack_enter(original: Callable[..., Any]) -> Callable[..., Any]:
    def enter(self: Any) -> Any:
        if rebinding():
            return original(self)
        saved, self.traceback = self.traceback, None
        try:
            return original(self)
        finally:
            self.traceback = saved
    return enter


@contextlib.contextmanager
def kernel_probes(sink: ProbeSink) -> Iterator[None]:
    """Instruments every interpreted ``pallas_call`` lowered inside the context.

    Programs lowered before the context (or after it) are not instrumented and must not be
    reused inside it: callers clear jax's caches around it (:func:`clear_compiled`). Not
    reentrant: a second active context is an error.
    """
    jx = _internals()
    prim, mlir, ucm = jx["prim"], jx["mlir"], jx["siu"].UserContextManager

    def hit(site_id: int, code: Any) -> None:
        sink.hit(site_id, int(np.asarray(code)))

    with _LOCK:
        if _ACTIVE:
            raise RuntimeError("kernel coverage is already being recorded")
        entry = mlir._lowerings[prim]
        rule, inline = getattr(entry, "rule", None), getattr(entry, "inline", None)
        if not callable(rule) or inline is None:
            raise KernelProbeLayoutError("mlir._lowerings entries have no .rule/.inline")
        original_enter = ucm.__dict__["__enter__"]
        mlir.register_lowering(prim, _wrapped_lowering(jx, rule, sink, hit), inline=inline)
        ucm.__enter__ = _real_stack_enter(original_enter)
        _ACTIVE.append(sink)
    try:
        yield
    finally:
        with _LOCK:
            mlir._lowerings[prim] = entry
            ucm.__enter__ = original_enter
            _ACTIVE.clear()


def clear_compiled() -> None:
    """Drops jax's in-memory traces, lowerings and executables (``jax.clear_caches``), so
    that a program lowered with probes is never run without them, or the reverse."""
    jax.clear_caches()


def perturbed_body(params: dict[str, Any], names: frozenset[str]) -> tuple[Any, int]:
    """A ``pallas_call``'s body (its params' open ``jaxpr``) traced again, in its grid's
    tracing environment, with every floating result of the primitives ``names`` perturbed
    (:func:`~kernel_harness.core.compat.kernel_eval.perturbed`), in nested bodies too
    (``pl.when``, loops, scoped regions, custom-derivative calls inline): the same refs in,
    the same writes, other values; and how many results it perturbed (0: the core is
    computed in integers here, an int8 product: nothing to judge)."""
    ctx = ProbeContext(jx=_internals(), sink=_NO_SINK, kernel="", kernel_file="",
                       hit=lambda *a: None, probing=False, perturb=names)
    grid = params.get("grid_mapping")
    env = getattr(grid, "trace_env", None)
    if env is None:
        raise KernelProbeLayoutError("a pallas_call's grid_mapping has no trace_env()")
    with env():
        body = instrument_open(ctx, params["jaxpr"], "perturbed kernel body")
    _PERTURBED[id(body)] = body  # kept alive, so its id stays its own
    while len(_PERTURBED) > 256:
        _PERTURBED.pop(next(iter(_PERTURBED)))
    return body, ctx.perturbed[0]


#: Perturbed bodies, which kernel coverage leaves uninstrumented and unrecorded.
_PERTURBED: dict[int, Any] = {}


class _NoSink:
    def site(self, site: ProbeSite) -> int:
        return 0

    def hit(self, site_id: int, code: int) -> None:
        pass

    def uninstrumented(self, kernel: str, why: str) -> None:
        pass

    def instrumented(self, kernel: str) -> None:
        pass


_NO_SINK = _NoSink()


__all__ = ["KNOWN_JAX", "WHILE_OUTCOMES", "KernelProbeLayoutError", "ProbeSink", "ProbeSite",
           "clear_compiled", "kernel_probes", "perturbed_body"]
