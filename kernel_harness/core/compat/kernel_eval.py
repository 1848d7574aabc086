"""The evaluator behind :mod:`kernel_harness.core.compat.kernel_probes`: re-traces a kernel
body jaxpr, rebinding each equation with its own source info, instrumenting nested jaxprs
and adding a ``jax.debug.callback`` probe after each ``cond``, scalar comparison,
``select_n`` and ``while`` (see that module's docstring for what each probe reports)."""

from __future__ import annotations

import dataclasses
import functools
import sysconfig
import threading
from collections.abc import Callable
from typing import Any, Protocol

import jax
import numpy as np

from kernel_harness.core.frames import is_plumbing

KNOWN_JAX = "0.10.x and 0.12.x"
_COMPARISONS = frozenset({"lt", "le", "gt", "ge", "eq", "ne"})
#: Primitives whose jaxpr params are passed through untouched (their bind re-derives
#: callables from them; a kernel rarely uses them).
_OPAQUE = frozenset({"custom_jvp_call", "custom_vjp_call", "custom_vjp_call_jaxpr",
                     "custom_lin", "pallas_call"})
_NESTED_JIT = frozenset({"pjit", "jit", "closed_call", "core_call"})
#: Custom-derivative calls evaluated inline while perturbing (nothing is differentiated
#: inside a kernel body), and the param holding their primal body.
_CUSTOM = {"custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr",
           "custom_vjp_call_jaxpr": "fun_jaxpr"}
WHILE_OUTCOMES = ("0 trips", "1 trip", "2+ trips")


class KernelProbeLayoutError(RuntimeError):
    """This jax does not carry Pallas kernels, lowerings or source info as expected."""

    def __init__(self, missing: str):
        super().__init__(
            f"jax {jax.__version__}: kernel coverage cannot instrument Pallas kernels "
            f"({missing}); kernel_harness knows jax {KNOWN_JAX}. Adapt "
            f"kernel_harness/core/compat/kernel_probes.py to this jax, or run without "
            f"kernel coverage.")
        self.missing = missing


@dataclasses.dataclass(frozen=True)
class ProbeSite:
    """One probed equation of a kernel.

    Attributes:
      kernel: the kernel body function (``flash_attention_kernel``).
      kernel_file: the file defining the kernel body.
      file, line, function: the source line of the equation (see the module doc).
      kind: ``cond``, ``compare``, ``select`` or ``while``.
      detail: the primitive (``lt``, ``cond``...) and, for a cond, its branch count.
      outcomes: every outcome the probe can report, by the code it sends.
    """

    kernel: str
    kernel_file: str
    file: str
    line: int
    function: str
    kind: str
    detail: str
    outcomes: tuple[str, ...]


class ProbeSink(Protocol):
    """Where probes report: ``site`` at lowering time (returns an id), ``hit`` at run time."""

    def site(self, site: ProbeSite) -> int: ...  # noqa: D102

    def hit(self, site_id: int, code: int) -> None: ...  # noqa: D102

    def uninstrumented(self, kernel: str, why: str) -> None: ...  # noqa: D102

    def instrumented(self, kernel: str) -> None: ...  # noqa: D102


# --- source lines ---------------------------------------------------------------------------

_STDLIB = sysconfig.get_path("stdlib")


def _is_internal(file_name: str) -> bool:
    return is_plumbing(file_name) or file_name.startswith((_STDLIB, "<"))


def _frame(source_info: Any) -> tuple[str, int, str] | None:
    """``(file, line, function)`` of the innermost kernel-code frame, None if none."""
    tb = getattr(source_info, "traceback", None)
    if tb is None:
        return None
    frames = getattr(tb, "frames", None)
    if frames is None:
        raise KernelProbeLayoutError("a source_info traceback has no .frames")
    for f in frames:
        if not _is_internal(f.file_name):
            return f.file_name, int(f.line_num), f.function_name
    return None


# --- the evaluator --------------------------------------------------------------------------

_TLS = threading.local()


def rebinding() -> bool:
    """Whether this thread is inside the evaluator (rebinding an equation)."""
    return bool(getattr(_TLS, "rebinding", 0))


@dataclasses.dataclass
class ProbeContext:
    """What the evaluator carries: jax internals, the sink, the kernel, the frames."""

    jx: dict[str, Any]
    sink: ProbeSink
    kernel: str
    kernel_file: str
    hit: Callable[..., None]
    enclosing: tuple[str, int, str] | None = None
    fallback: tuple[str, int, str] | None = None
    probing: bool = True
    #: Primitives whose floating results are perturbed (:func:`perturbed`), probing off:
    #: the op's core replaced inside a kernel body, to see that the kernel's result moves.
    perturb: frozenset[str] = frozenset()
    #: How many floating results were perturbed (one list, shared by nested contexts).
    perturbed: list[int] = dataclasses.field(default_factory=lambda: [0])


def _register(ctx: ProbeContext, eqn: Any, kind: str, detail: str,
              outcomes: tuple[str, ...]) -> int:
    where = (ctx.enclosing or _frame(eqn.source_info) or ctx.fallback
             or ("<unknown>", 0, "<unknown>"))
    return ctx.sink.site(ProbeSite(kernel=ctx.kernel, kernel_file=ctx.kernel_file,
                                   file=where[0], line=where[1], function=where[2],
                                   kind=kind, detail=detail, outcomes=outcomes))


def _probe(ctx: ProbeContext, site_id: int, code: Any) -> None:
    jax.debug.callback(functools.partial(ctx.hit, site_id), code)


def _select_code(which: Any, cases: int) -> tuple[Any, tuple[str, ...]]:
    import jax.numpy as jnp

    if which.dtype == np.bool_:
        labels: tuple[str, ...] = ("all-false", "all-true")
        lo, hi = jnp.min(which.astype(np.int32)), jnp.max(which.astype(np.int32))
    else:
        labels = tuple(f"all-case-{k}" for k in range(cases))
        lo, hi = jnp.min(which), jnp.max(which)
    if which.ndim == 0 or which.size == 1:
        return lo, labels
    return jnp.where(lo == hi, lo, len(labels)).astype(np.int32), (*labels, "mixed")


def _trace(ctx: ProbeContext, fn: Callable[..., Any], avals: list[Any],
           name: str) -> tuple[Any, list]:
    jx = ctx.jx
    dbg = jx["lu"].DebugInfo("kernel_coverage", name, None, None)
    jaxpr, _, consts = jx["pe"].trace_to_jaxpr_dynamic(
        jx["lu"].wrap_init(fn, debug_info=dbg), avals)
    return jaxpr, consts


def _closed(ctx: ProbeContext, cj: Any, name: str) -> Any:
    jaxpr, consts = _trace(ctx, functools.partial(_eval, ctx, cj.jaxpr, cj.consts),
                           list(cj.in_avals), name)
    if len(consts) != len(cj.consts):
        raise KernelProbeLayoutError(f"re-tracing a {name} jaxpr changed its constants")
    return ctx.jx["close"](jaxpr, consts)


def instrument_open(ctx: ProbeContext, jaxpr: Any, name: str) -> Any:
    """The open ``jaxpr`` (no constants, e.g. a kernel body) re-traced with probes."""
    if jaxpr.constvars:
        raise KernelProbeLayoutError(f"an open {name} jaxpr with constvars")
    new, consts = _trace(ctx, functools.partial(_eval, ctx, jaxpr, []),
                         [v.aval for v in jaxpr.invars], name)
    if consts:
        raise KernelProbeLayoutError(f"re-tracing an open {name} jaxpr added constants")
    return new


def _instrument_value(ctx: ProbeContext, value: Any, name: str) -> Any:
    closed, opened = ctx.jx["closed_types"], ctx.jx["open_types"]
    if isinstance(value, closed):
        return _closed(ctx, value, name)
    if opened and isinstance(value, opened):
        return instrument_open(ctx, value, name)
    if isinstance(value, tuple | list) and any(
            isinstance(v, closed + opened) for v in value):
        return type(value)(_instrument_value(ctx, v, name) for v in value)
    return value


def _while(ctx: ProbeContext, eqn: Any, invals: list[Any]) -> list[Any]:
    """Rebinds a ``while`` with a trip counter as an extra carry; probes the count."""
    from jax import lax

    core = ctx.jx["core"]
    p = eqn.params
    nc, nb = p["cond_nconsts"], p["body_nconsts"]
    cond_consts, body_consts, carry = invals[:nc], invals[nc:nc + nb], invals[nc + nb:]
    i32 = core.ShapedArray((), np.dtype(np.int32))
    cj, bj = p["cond_jaxpr"], p["body_jaxpr"]

    # No probes in the loop test: the trip count reports it, and XLA may rewrite the test of
    # a loop whose trip count it knows (a probe there was seen never to run).
    quiet = dataclasses.replace(ctx, probing=False)

    def cond_fn(*args: Any) -> Any:
        return _eval(quiet, cj.jaxpr, cj.consts, *args[:-1])

    def body_fn(*args: Any) -> Any:
        return [*_eval(ctx, bj.jaxpr, bj.consts, *args[:-1]),
                lax.add(args[-1], np.int32(1))]

    site = _register(ctx, eqn, "while", "while", WHILE_OUTCOMES)
    new_cond, cc = _trace(ctx, cond_fn, [*cj.in_avals, i32], "while cond")
    new_body, bc = _trace(ctx, body_fn, [*bj.in_avals, i32], "while body")
    if len(cc) != len(cj.consts) or len(bc) != len(bj.consts):
        raise KernelProbeLayoutError("re-tracing a while loop changed its constants")
    close = ctx.jx["close"]
    params = dict(p, cond_jaxpr=close(new_cond, cc), body_jaxpr=close(new_body, bc))
    outs = eqn.primitive.bind(*cond_consts, *body_consts, *carry, np.int32(0), **params)
    _probe(ctx, site, lax.min(outs[-1], np.int32(2)))
    return list(outs[:-1])


def _eval(ctx: ProbeContext, jaxpr: Any, consts: Any, *args: Any) -> list[Any]:
    """``core.eval_jaxpr`` that adds probes and instruments nested jaxprs."""
    core, siu = ctx.jx["core"], ctx.jx["siu"]
    env: dict[Any, Any] = {}

    def read(v: Any) -> Any:
        return v.val if isinstance(v, core.Literal) else env[v]

    for v, x in zip(jaxpr.constvars, consts, strict=True):
        env[v] = x
    for v, x in zip(jaxpr.invars, args, strict=True):
        env[v] = x
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        invals = [read(v) for v in eqn.invars]
        name_stack = siu.current_name_stack() + eqn.source_info.name_stack
        _TLS.rebinding = getattr(_TLS, "rebinding", 0) + 1
        try:
            with siu.user_context(eqn.source_info.traceback, name_stack=name_stack), \
                    eqn.ctx.manager:
                if ctx.perturb and _CUSTOM.get(name) in eqn.params:
                    body = eqn.params[_CUSTOM[name]]
                    ans = _eval(ctx, body.jaxpr, body.consts, *invals)
                    if not eqn.primitive.multiple_results:
                        ans = ans[0]
                elif name == "while" and ctx.probing:
                    here = ctx.enclosing or _frame(eqn.source_info) or ctx.fallback
                    ans: Any = _while(dataclasses.replace(ctx, fallback=here), eqn, invals)
                else:
                    params = eqn.params
                    if name not in _OPAQUE:
                        here = ctx.enclosing or _frame(eqn.source_info) or ctx.fallback
                        child = dataclasses.replace(ctx, fallback=here)
                        if name in _NESTED_JIT:
                            child = dataclasses.replace(child, enclosing=here)
                        params = {k: _instrument_value(child, v, f"{name}.{k}")
                                  for k, v in params.items()}
                    ans = eqn.primitive.bind(*invals,
                                             **eqn.primitive.get_bind_params(params))
                    if name in ctx.perturb:
                        results = ans if eqn.primitive.multiple_results else [ans]
                        ctx.perturbed[0] += sum(perturbed(a) is not a for a in results)
                        ans = ([perturbed(a) for a in ans] if eqn.primitive.multiple_results
                               else perturbed(ans))
                _add_probe(ctx, eqn, name, invals, ans)
        finally:
            _TLS.rebinding -= 1
        outs = ans if eqn.primitive.multiple_results else [ans]
        for v, x in zip(eqn.outvars, outs, strict=True):
            env[v] = x
    return [read(v) for v in jaxpr.outvars]


def perturbed(value: Any) -> Any:
    """A floating ``value`` moved everywhere, inside its own range: ``x (0.5 + 0.25 / (1 +
    x^2))``, a factor between 0.5 and 0.75 that depends on ``x`` (not a uniform scale, which
    a softmax's normalization would cancel), the sign kept and the magnitude shrunk. So a
    result that only passes through what is zero on its natural range (``0 * x``, ``x - x``,
    ``min(x, 0)`` of a non-negative ``x``, ``max(x - 1, 0)`` of an exponential) stays zero,
    while any real use of it changes. Others as they are."""
    from jax import lax

    dtype = getattr(value, "dtype", None)
    if dtype is None or not jax.numpy.issubdtype(dtype, jax.numpy.inexact):
        return value
    one = np.asarray(1, dtype)
    factor = lax.add(np.asarray(0.5, dtype), lax.div(np.asarray(0.25, dtype),
                                                     lax.add(one, lax.mul(value, value))))
    return lax.mul(value, factor)


def _add_probe(ctx: ProbeContext, eqn: Any, name: str, invals: list[Any], ans: Any) -> None:
    from jax import lax

    if not ctx.probing:
        return
    if name == "cond":
        n = len(eqn.params["branches"])
        labels = ("false", "true") if n == 2 else tuple(f"branch {i}" for i in range(n))
        site = _register(ctx, eqn, "cond", f"cond/{n}", labels)
        idx = lax.clamp(np.int32(0), invals[0].astype(np.int32), np.int32(n - 1))
        _probe(ctx, site, idx)
    elif name in _COMPARISONS and np.shape(ans) == ():
        site = _register(ctx, eqn, "compare", name, ("false", "true"))
        _probe(ctx, site, lax.convert_element_type(ans, np.int32))
    elif name == "select_n":
        code, labels = _select_code(invals[0], len(invals) - 1)
        site = _register(ctx, eqn, "select", "select_n", labels)
        _probe(ctx, site, code)
