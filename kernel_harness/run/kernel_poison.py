"""Whether an implementation's result is its kernels' result: poisoning (issue 55).

Counting the kernels in a trace (:mod:`kernel_harness.run.kernel_count`) does not show
that their results are used: an implementation can launch its kernel and return plain
JAX's answer (the kernel's result thrown away, or times zero plus XLA's), or keep the
kernel in a ``while`` that runs no trip, or in a ``cond`` branch this input does not take.
So once per static configuration (the count's memo key), the traced program the count
made is evaluated again on the call's real inputs (how they are kept: below), twice, with
every executed ``pallas_call``'s result replaced by one of two different fills
(:mod:`kernel_harness.core.compat.pallas_poison`):

- forward: the call's jaxpr; judged where the forward pass counted a kernel;
- backward: the backward jaxpr the count traced, on fixed non-constant cotangents, its
  residuals from the forward evaluated with the same fill; judged where the backward
  counted a kernel. A gradient may come from a forward kernel's residuals alone (splash's
  dsinks: XLA, from the forward's logsumexp), so the forward kernels are filled too: a
  gradient that depends on no kernel, forward or backward, fails (plain JAX's autodiff of
  the primals, a backward kernel's result dropped).

The real inputs: a call made on concrete arrays keeps them at once. A traced call (the
adapter jits its program) has none; adding a host callback to the adapter's program would
keep JAX's persistent compilation cache from storing it (a program with a host callback is
never cached), so instead the adapter runs once more, right after the real run, on a
:class:`Probe`: a stand-in that keeps its inputs (``jax.debug.callback``, in this second
program only) and returns zeros of the implementation's output shapes, so the probe program
runs no kernel (a small, quick compile).

The rule, per floating output leaf (the call's outputs; the gradients of its floating
traced inputs): an element is written by a kernel when it differs between the two fills
(NaN in both counts as equal). A leaf none of whose elements is written by a kernel fails:
class "kernel result unused". A leaf that is exactly zero under both fills is not judged
(no kernel writes it for this input: a gradient the implementation's VJP defines as zero;
its value is the reference comparison's to judge). Elements a wrapper legitimately sets
without a kernel (padding zeroed by a ``where``, rows past the groups' total) stay unchanged
in the pristine kernels too, so a leaf with some elements written passes: a cheat that
replaces only part of an output is left to the comparison with the reference.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax
import numpy as np

from kernel_harness.core.compat import kernel_flow, pallas_poison
from kernel_harness.run import kernel_core_value, kernel_eager

#: The failure class, as reports and events name it.
UNUSED = "kernel result unused"


@dataclasses.dataclass(frozen=True)
class Backward:
    """What the backward poisoning evaluates: ``joint`` (the dynamic inputs -> the floating
    outputs, then the residuals), ``jaxpr`` (the open backward jaxpr: residuals as its
    constvars, cotangents in, one gradient per ``names``)."""

    joint: Any
    outputs: int
    jaxpr: Any
    names: tuple[str, ...]


@dataclasses.dataclass(eq=False)
class Poisoning:
    """One configuration's poisoning: what to evaluate, the inputs captured from its real
    run, and the verdict (``unused`` is None until judged)."""

    forward: Any | None
    out_names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    #: The call's output shapes (what a :class:`Probe` returns), and its :func:`call_key`.
    shape_tree: Any = None
    key: Any = None
    backward: Backward | None = None
    inputs: list[np.ndarray] | None = None
    unused: tuple[str, ...] | None = None
    error: str | None = None
    #: Per pass, the primitives of the op's core its kernels compute (``KernelExpectation``'s
    #: ``*_computes``, groups merged); perturbed inside the kernel bodies, they must change
    #: every output the kernels write. ``cancelled``: the passes where they did not, once
    #: judged (``{"forward": ("result",)}``); ``core_skipped``: why a pass with a declared
    #: core was not judged (no interpreted kernel body computes a floating result of it),
    #: said in the example's events, never silently.
    core: dict[str, frozenset[str]] = dataclasses.field(default_factory=dict)
    cancelled: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    core_error: str | None = None
    core_skipped: str | None = None
    #: ``(direct call, traced program, settings)`` where this configuration is called eagerly
    #: (:mod:`kernel_harness.run.kernel_eager`); its verdict, once judged (None: not).
    eager: tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any]] | None = None
    eager_verdict: kernel_eager.EagerVerdict | None = None
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock, repr=False)

    def wants_inputs(self) -> bool:
        """Whether the next call's inputs are still needed."""
        return self.unused is None and self.inputs is None and (
            self.forward is not None or self.backward is not None)

    def capture(self, *values: Any) -> None:
        """Keeps the first inputs of the shapes traced (a ``jax.debug.callback`` target in
        the real program: later runs of the compiled program, batched or sharded slices of
        other shapes, are ignored)."""
        if self.inputs is not None or self.unused is not None:
            return
        arrays = [np.asarray(v) for v in values]
        with self._lock:
            if self.inputs is None and tuple(a.shape for a in arrays) == self.shapes:
                self.inputs = arrays

    def give_up(self, why: str) -> None:
        """Judges nothing, for good (``error`` says why): never a retry at every example."""
        self.error, self.unused, self.forward, self.backward = why, (), None, None

    def settle(self) -> None:
        """Judges the captured inputs once (nothing when none came yet). A program the
        evaluator cannot rebuild raises :class:`pallas_poison.PoisonLayoutError`; any other
        error is kept in ``error`` and judges nothing."""
        if self.unused is not None or (self.forward is None and self.backward is None):
            return
        if self.inputs is None:
            jax.effects_barrier()  # a debug callback may still be on its way
        if self.inputs is None:
            return
        try:
            unused = self._judge(self.inputs)
        except pallas_poison.PoisonLayoutError:
            raise
        except Exception as e:  # noqa: BLE001 - reported beside the count, never a pass claim
            self.error = f"{type(e).__name__}: {str(e).strip()[:200]}"
            unused = ()
        if self.eager is not None:  # judged after the example's bitwise rerun
            kernel_eager.defer(self, self.eager, self.inputs)
        # Judged once: what it needed is dropped (the memo keeps every configuration).
        self.unused, self.inputs, self.forward, self.backward = unused, None, None, None
        self.eager = None

    def _judge(self, inputs: list[np.ndarray]) -> tuple[str, ...]:
        fwd, bwd = self.forward, self.backward

        def both(x: list[Any]) -> tuple[list[list[Any]], list[list[Any]]]:
            outs = [pallas_poison.evaluate(fwd, x, w) for w in (0, 1)] if fwd else [[], []]
            grads: list[list[Any]] = [[], []]
            for w in (0, 1) if bwd is not None else ():
                ran = pallas_poison.evaluate(bwd.joint, x, w)
                outputs, residuals = ran[:bwd.outputs], ran[bwd.outputs:]
                cts = [pallas_poison.fill(o.shape, o.dtype, 0) for o in outputs]
                grads[w] = pallas_poison.evaluate(bwd.jaxpr, cts, w, consts=residuals)
            return outs, grads

        skipped: list[str] = []  # passes whose core no interpreted kernel body computes
        moved = functools.partial(kernel_core_value.moved, fwd, bwd, self.core,
                                  skipped=skipped)

        (a, b), (ga, gb) = _compiled(both, inputs)  # one program: one compile
        found = [f"output `{n}`" for n, x, y in zip(self.out_names, a, b, strict=False)
                 if n and _unchanged(x, y)]
        names = bwd.names if bwd is not None else ()
        grads = [f"gradient of `{n}`" for n, x, y in zip(names, ga, gb, strict=False)
                 if _unchanged(x, y)]
        # Its own program (a failure leaves the fills' verdict).
        if self.core:
            self.core_skipped = kernel_core_value.not_traced(fwd)
        if self.core and not self.core_skipped:
            try:
                self._judge_core(_compiled(moved, inputs), found + grads, names)
                if self.cancelled:  # the case's data may cancel it (x = 0): fresh data too
                    first, self.cancelled = self.cancelled, {}
                    self._judge_core(_compiled(moved, kernel_eager.drawn(inputs)),
                                     found + grads, names)
                    self.cancelled = {w: v for w, v in self.cancelled.items() if w in first}
                self.core_skipped = kernel_core_value.not_perturbed(skipped)
            except pallas_poison.PoisonLayoutError:
                raise
            except Exception as e:  # noqa: BLE001 - said beside the count, never a pass claim
                self.core_error = f"{type(e).__name__}: {str(e).strip()[:200]}"
        return tuple(found + grads)

    def _judge_core(self, perturbed: dict[str, Any], unused: list[str],
                    names: Sequence[str]) -> None:
        """Names in ``cancelled`` the outputs the core's perturbation left unchanged."""
        fwd, bwd = self.forward, self.backward
        labels = {"forward": [f"output `{n}`" if n else "" for n in self.out_names],
                  "backward": [f"gradient of `{n}`" for n in names]}
        # Judged: the outputs a kernel of the pass reaches (splash's dsinks, XLA's from the
        # forward's logsumexp, is no backward kernel's to change).
        reached = {where: [kernel for kernel, _ in kernel_flow.reach(j, [])]
                   for where, j in (("forward", fwd), ("backward", bwd and bwd.jaxpr))
                   if where in perturbed}
        for where, (base, other) in perturbed.items():
            judged = [(lab, x, y) for lab, hit, x, y in zip(labels[where], reached[where],
                                                            base, other, strict=False)
                      if lab and hit and lab not in unused]
            # None moves, each nonzero somewhere (a decode with no visible key: zeros, m kept).
            if judged and all(np.any(np.asarray(x)) and _unchanged(x, y) for _, x, y in judged):
                self.cancelled[where] = tuple(lab for lab, _, _ in judged)

    def why_not(self) -> str | None:
        """Why poisoning, or the core's perturbation, judged nothing (None: both judged)."""
        return self.error or (f"(the fills judged; the core's perturbation did not) "
                              f"{self.core_error}" if self.core_error else None)


def _compiled(fn: Callable[[list[Any]], Any], inputs: list[np.ndarray]) -> Any:
    """``fn(inputs)`` as one compiled program (evaluated op by op, a wrapper's every
    primitive would compile alone, once per shape); on CPU without backend optimizations,
    as the interpreted kernels' programs."""
    cpu = jax.default_backend() == "cpu"
    options = {"xla_backend_optimization_level": 0} if cpu else None
    return jax.jit(fn, compiler_options=options)(inputs)


def call_key(treedef: Any, leaves: list[Any], dyn: list[int]) -> tuple[Any, bool]:
    """``(key, exact)``: a call's configuration (its tree, its static leaves, the shapes and
    dtypes of its traced ones); where a static leaf is unhashable (a concrete array), only
    the tree and the traced leaves (``exact`` False)."""
    key: Any = (treedef, tuple((i, tuple(np.shape(x)), str(x.dtype)) if i in dyn else x
                               for i, x in enumerate(leaves)))
    try:
        hash(key)
        return key, True
    except TypeError:
        return (treedef, tuple((i, tuple(np.shape(leaves[i])), str(leaves[i].dtype))
                               for i in dyn)), False


_LOCAL = threading.local()


def next_product() -> int:
    """The ordinal of a factory's product in this run (:func:`new_run` starts the count):
    a factory's products (splash's plain and ``save_residuals`` kernels) are told apart by
    it, in the real run and in the probe run alike, where their calls look the same."""
    _LOCAL.products = getattr(_LOCAL, "products", 0) + 1
    return _LOCAL.products


def new_run() -> None:
    """Starts counting factory products again (at each real or probe run)."""
    _LOCAL.products = 0


def dynamic(leaves: list[Any]) -> list[int]:
    """The positions of a call's traced leaves (tracers; where there is none, its arrays)."""
    dyn = [i for i, x in enumerate(leaves) if isinstance(x, jax.core.Tracer)]
    return dyn or [i for i, x in enumerate(leaves) if isinstance(x, jax.Array)]


class StandIn:
    """A stand-in for an implementation that carries its name, module, attributes and
    signature (``functools.update_wrapper``), so adapters that inspect their
    implementation (splash's factory, ragged's signature check) see the implementation.
    ``product``: which of a factory's products it stands in for, where it does."""

    def __init__(self, impl: Callable[..., Any], product: int | None = None):
        functools.update_wrapper(self, impl)
        target = impl
        while isinstance(target, functools.partial):
            target = target.func
        if getattr(target, "__module__", None):
            self.__module__ = target.__module__
        self._impl, self._product = impl, product

    def __getattr__(self, name: str) -> Any:
        if "_impl" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self.__dict__["_impl"], name)


class Probe(StandIn):
    """A stand-in (:class:`StandIn`) that keeps the inputs of the calls whose poisoning
    waits for them (:func:`probing`) and returns zeros of their output shapes, calling no
    kernel; a factory's product is probed too."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        leaves, treedef = jax.tree_util.tree_flatten((args, kwargs))
        dyn = dynamic(leaves)
        if not dyn:
            made = self._impl(*args, **kwargs)
            return Probe(made, next_product()) if callable(made) else made
        key = (self._product, call_key(treedef, leaves, dyn)[0])
        poison = getattr(_LOCAL, "pending", {}).get(key)
        if poison is None:
            shapes = _output_shapes(self._impl, leaves, treedef, dyn)
        else:
            shapes = poison.shape_tree
            values = [leaves[i] for i in dyn]
            if any(isinstance(v, jax.core.Tracer) for v in values):
                jax.debug.callback(poison.capture, *values)
            else:
                poison.capture(*values)
        return jax.tree_util.tree_map(lambda s: jax.numpy.zeros(s.shape, s.dtype), shapes)


def bound(fn: Callable[..., Any], leaves: list[Any], treedef: Any, dyn: list[int]
          ) -> Callable[..., Any]:
    """``fn``'s call on ``leaves`` as a function of the values at positions ``dyn``, the
    other (static) leaves as they are (``interpret=True`` stays a Python value)."""
    def call(*values: Any) -> Any:
        full = list(leaves)
        for i, v in zip(dyn, values, strict=True):
            full[i] = v
        args, kwargs = jax.tree_util.tree_unflatten(treedef, full)
        return fn(*args, **kwargs)

    return call


def _output_shapes(fn: Callable[..., Any], leaves: list[Any], treedef: Any,
                   dyn: list[int]) -> Any:
    """``fn``'s output shapes, its static leaves as they are, the others abstract."""
    return jax.eval_shape(bound(fn, leaves, treedef, dyn),
                          *(jax.ShapeDtypeStruct(np.shape(leaves[i]), leaves[i].dtype)
                            for i in dyn))


@contextlib.contextmanager
def probing(pending: Sequence[Poisoning]) -> Iterator[None]:
    """Within the block, a :class:`Probe` keeps the inputs of ``pending``'s calls."""
    _LOCAL.pending = {p.key: p for p in pending}
    new_run()
    try:
        yield
    finally:
        _LOCAL.pending = {}


def _unchanged(a: Any, b: Any) -> bool:
    """The rule of the module doc: no element differs between the fills, and not all zero."""
    a, b = np.asarray(a), np.asarray(b)
    if a.size == 0:
        return False
    if a.dtype.kind not in "fc":
        a, b = a.astype(np.float32), b.astype(np.float32)
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    return bool(same.all()) and bool(np.any(a))


def leaf_names(fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any]
               ) -> list[str]:
    """A name per leaf of ``(args, kwargs)``: the parameter's (``lhs``, ``x[0]``) where the
    signature tells it, else ``argument 2``."""
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    names = []
    for path, _ in jax.tree_util.tree_flatten_with_path((tuple(args), kwargs))[0]:
        head, rest = path[1], jax.tree_util.keystr(tuple(path[2:]))
        if path[0].idx == 0:  # type: ignore[attr-defined]
            i = head.idx  # type: ignore[attr-defined]
            names.append(f"{params[i] if i < len(params) else f'argument {i}'}{rest}")
        else:
            names.append(f"{head.key}{rest}")  # type: ignore[attr-defined]
    return names


def output_names(shape_tree: Any) -> tuple[str, ...]:
    """A name per leaf of the call's result (``result``, ``result[1]``, ``result['out']``);
    "" for a leaf that is not floating (never judged)."""
    flat = jax.tree_util.tree_flatten_with_path(shape_tree)[0]
    return tuple(f"result{jax.tree_util.keystr(tuple(p))}"
                 if jax.numpy.issubdtype(s.dtype, jax.numpy.inexact) else ""
                 for p, s in flat)


def problem_text(unused: Sequence[str]) -> str:
    """What each unused leaf is, in one line."""
    return "; ".join(
        f"the implementation's {what} does not depend on any executed Pallas kernel: "
        "replacing every kernel's result by two different fills left it unchanged"
        for what in unused)
