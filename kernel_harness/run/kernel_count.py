"""Which Pallas kernels an implementation really ran, per example, forward and backward.

The runner hands the family's adapter a counting wrapper of the implementation (one per
implementation, so compile caches keyed on it stay valid). The wrapper traces the
implementation once per configuration on abstract values (``jax.make_jaxpr``), counts the
kernels of that program (:mod:`kernel_harness.core.compat.pallas_count`) and runs THAT
program on the call's values: what is counted is what runs, so an implementation that
behaves differently when counted cannot show the count one program and run another.

Forward: the traced program. Backward (where the family expects backward kernels): the
jaxpr of ``jax.vjp``'s function for that same program (the one the adapter differentiates),
on cotangents of its floating outputs, differentiating its floating traced inputs. A kernel
factory's callable (splash's) is wrapped too. A call that cannot be traced on abstract
values is made directly and counted as running no kernel (with the reason). Counts are kept
per configuration (a cached program calls nothing: the example gets the count of the
program it ran); an example's count is the fewest kernels over its calls.

Once per configuration the traced programs are also evaluated with every kernel's result
replaced (:mod:`kernel_harness.run.kernel_poison`): an output that does not depend on any
executed kernel is named in ``KernelCount.unused``. A traced call's real inputs come from a
second run of the adapter on a probe (:func:`collecting`'s ``rerun``), never from a
callback in the adapter's own program (it would no longer be persistently cached).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import jax
import numpy as np

from kernel_harness.core.compat import pallas_count
from kernel_harness.core.compat.forced_settings import settings_in_force
from kernel_harness.core.compat.reentry import settings_reentry
from kernel_harness.records.kernels import KernelExpectation
from kernel_harness.run import kernel_core_value, kernel_eager, kernel_outside, kernel_poison
from kernel_harness.run.count_errors import CountUnavailable


@dataclasses.dataclass(frozen=True)
class CallCount:
    """The kernels of one call of the implementation.

    ``backward`` is None where it was not traced (a forward-only family) or could not be
    (``backward_error`` says why)."""

    forward: int
    forward_top: tuple[str, ...]
    backward: int | None = None
    backward_top: tuple[str, ...] = ()
    backward_error: str | None = None
    seconds: float = 0.0
    #: Measured primitives run outside every kernel on arrays of the problem's size
    #: (:mod:`kernel_harness.run.kernel_outside`), per pass.
    forward_outside: tuple[str, ...] = ()
    backward_outside: tuple[str, ...] = ()
    #: The configuration's poisoning (shared by every call of it; judged after the run).
    poison: kernel_poison.Poisoning | None = dataclasses.field(default=None, compare=False)


@dataclasses.dataclass(frozen=True)
class KernelCount:
    """The kernels one example ran: over its implementation calls, the fewest per pass
    (and what the call with the fewest ran), and the tracing time counting cost."""

    calls: int
    forward: int
    forward_top: tuple[str, ...]
    backward: int | None
    backward_top: tuple[str, ...]
    backward_error: str | None
    seconds: float
    #: Outputs that depend on no executed kernel (:mod:`kernel_harness.run.kernel_poison`),
    #: ``"output `result`"``, ``"gradient of `x`"``; and why poisoning judged nothing.
    unused: tuple[str, ...] = ()
    poison_error: str | None = None
    #: Whether poisoning judged a call of this example's configuration (False: no kernel
    #: ran, or the real run's inputs never reached it).
    poisoned: bool = False
    #: Per pass (``forward``, ``backward``), the measured primitives any call ran outside
    #: its kernels on arrays of the problem's size (:mod:`kernel_harness.run.kernel_outside`).
    outside: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    #: Why the declared core was not judged by value (``Poisoning.core_skipped``).
    core_skipped: str | None = None
    #: The direct calls' verdict (:mod:`kernel_harness.run.kernel_eager`; None: none made).
    eager: kernel_eager.EagerVerdict | None = None

    @classmethod
    def of(cls, calls: list[CallCount], seconds: float) -> KernelCount:
        """The example's count from its calls' counts."""
        fwd = min(calls, key=lambda c: c.forward)
        traced = [c for c in calls if c.backward is not None]
        bwd = min(traced, key=lambda c: c.backward) if traced else None
        error = next((c.backward_error for c in calls if c.backward_error), None)
        poisons = [c.poison for c in calls if c.poison is not None]
        unused = tuple(dict.fromkeys(u for p in poisons for u in (p.unused or ())))
        why = next(filter(None, (p.why_not() for p in poisons)), None)
        outside = {where: kernel_outside.pass_names(
            {n for c in calls for n in getattr(c, field)},
            [p.core[where] for p in poisons if where in p.cancelled])
            for where, field in (("forward", "forward_outside"), ("backward", "backward_outside"))}
        return cls(calls=len(calls), forward=fwd.forward, forward_top=fwd.forward_top,
                   backward=None if bwd is None else bwd.backward,
                   backward_top=() if bwd is None else bwd.backward_top,
                   backward_error=None if bwd is not None else error, seconds=seconds,
                   unused=unused, poison_error=why,
                   poisoned=any(p.unused is not None and p.error is None for p in poisons),
                   outside={k: v for k, v in outside.items() if v},
                   core_skipped=next(filter(None, (p.core_skipped for p in poisons)), None),
                   eager=kernel_eager.merged([p.eager_verdict for p in poisons]))

    def event(self) -> str:
        """``pallas kernels: fwd 1, bwd 2`` (the event every counted example notes)."""
        bwd = "" if self.backward is None else f", bwd {self.backward}"
        return f"pallas kernels: fwd {self.forward}{bwd}"

    def short(self, expected: KernelExpectation) -> tuple[str, ...]:
        """The passes below ``expected``: ``("fwd",)``, ``("bwd",)``, both or none."""
        out = []
        if self.forward < expected.forward:
            out.append("fwd")
        if expected.backward and (self.backward or 0) < expected.backward:
            out.append("bwd")
        return tuple(out)

    def shortfall_text(self, expected: KernelExpectation) -> str:
        """What each short pass ran instead, in one line ("" if none is short)."""
        parts = []
        for p in self.short(expected):
            if p == "bwd" and self.backward is None:
                why = self.backward_error or "the forward could not be traced"
                parts.append(f"the backward pass could not be traced ({why})")
                continue
            name, ran, want, top = (("forward", self.forward, expected.forward, self.forward_top)
                                    if p == "fwd" else ("backward", self.backward,
                                                        expected.backward, self.backward_top))
            parts.append(f"the {name} pass ran {ran} Pallas kernel(s) (expected >= {want}); "
                         f"it ran instead: {', '.join(top) or 'nothing'}")
        return "; ".join(parts)


_LOCAL = threading.local()
_WRAPPERS: dict[Any, Counting] = {}
_BY_CONFIG: collections.OrderedDict[Any, tuple[CallCount, ...]] = collections.OrderedDict()
_MAX_CONFIGS = 4096


def _sinks() -> list[list[CallCount]]:
    return _LOCAL.__dict__.setdefault("sinks", [])  # this thread's


def _inexact(x: Any) -> bool:
    """Floating (bfloat16 included: numpy does not count it as inexact, jnp does)."""
    return bool(jax.numpy.issubdtype(x.dtype, jax.numpy.inexact))


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:300]


def _trace(fn: Callable[..., Any], leaves: list[Any], treedef: Any, dyn: list[int],
           expected: KernelExpectation, where: Any) -> tuple[CallCount, Callable[..., Any]]:
    """Traces one call once: ``fn`` on ``leaves`` with the positions ``dyn`` abstract.
    Returns its count, with its :class:`~kernel_harness.run.kernel_poison.Poisoning` (the
    passes that ran a kernel), and the traced program (a function of the ``dyn`` values
    returning the call's result, bound from the caller's stack as a direct call would
    be). The backward, traced only to count, is traced from ``where``, the adapter's call
    (:func:`~kernel_harness.core.compat.pallas_count.traced_from`). A declared core no
    kernel computes (:func:`~kernel_harness.run.kernel_outside.core_missing`) is outside."""
    start = time.perf_counter()
    call = kernel_poison.bound(fn, leaves, treedef, dyn)
    avals = [jax.ShapeDtypeStruct(np.shape(leaves[i]), leaves[i].dtype) for i in dyn]
    fwd, shape_tree = jax.make_jaxpr(call, return_shape=True)(*avals)
    out_tree = jax.tree_util.tree_structure(shape_tree)

    def program(*values: Any) -> Any:
        # Bound from the real call's stack (not the trace's, which ends at ``call``), so a
        # kernel's interpreter findings name the adapter's call as a direct call would.
        return jax.tree_util.tree_unflatten(out_tree, jax.core.eval_jaxpr(
            fwd.jaxpr, fwd.consts, *values, propagate_source_info=False))

    problem = kernel_outside.problem_size(
        [tuple(a.shape) for a in avals]
        + [tuple(o.shape) for o in jax.tree_util.tree_leaves(shape_tree)])
    out_names = kernel_poison.output_names(shape_tree)
    count = CallCount(forward=pallas_count.pallas_kernels(fwd),
                      forward_top=pallas_count.top_primitives(fwd),
                      forward_outside=kernel_outside.measure([fwd], problem, strict=True)
                      + kernel_outside.core_missing(fwd, expected.forward_computes,
                                                    out_names))
    poison = kernel_poison.Poisoning(forward=fwd if count.forward else None, out_names=out_names,
        shape_tree=shape_tree, shapes=tuple(tuple(a.shape) for a in avals), core=kernel_outside
        .core_names(expected.forward_computes, expected.backward_computes))
    if expected.backward > 0:
        args, kwargs = jax.tree_util.tree_unflatten(treedef, leaves)
        names = kernel_poison.leaf_names(fn, args, kwargs)
        with pallas_count.traced_from(where):
            found = _trace_backward(program, avals, [names[i] for i in dyn], problem,
                                    expected.backward_computes)
        found["forward_outside"] = tuple(sorted(
            {*count.forward_outside, *found.pop("joint_outside", ())}))
        poison.backward = found.pop("poison", None) if found.get("backward") else None
        found.pop("poison", None)
        count = dataclasses.replace(count, **found)
    return (dataclasses.replace(count, poison=poison, seconds=time.perf_counter() - start),
            program)


def _trace_backward(call: Callable[..., Any], avals: list[Any],
                    names: list[str], problem: int, computes: Any) -> dict[str, Any]:
    """The backward's count and poisoning; what the forward run for the gradient (a
    ``custom_vjp`` forward rule) and the backward compute outside their kernels."""
    wrt = [j for j, a in enumerate(avals) if _inexact(a)]
    if not wrt:
        return {"backward": None, "backward_error": "no floating traced input to differentiate"}
    box: dict[str, Any] = {}

    def differentiated(*values: Any) -> Any:
        def f(*d: Any) -> tuple[Any, ...]:
            full = list(values)
            for j, v in zip(wrt, d, strict=True):
                full[j] = v
            return tuple(o for o in jax.tree_util.tree_leaves(call(*full)) if _inexact(o))

        out, vjp = jax.vjp(f, *(values[j] for j in wrt))
        box["bwd"] = jax.make_jaxpr(vjp)(
            tuple(jax.ShapeDtypeStruct(o.shape, o.dtype) for o in out))
        box["outputs"] = len(out)
        return (*out, *box["bwd"].consts)  # the residuals: the poisoning's backward inputs

    try:
        joint = jax.make_jaxpr(differentiated)(*avals)
    except pallas_count.KernelCountLayoutError:
        raise
    except Exception as e:  # noqa: BLE001 - the reason is reported as the backward's count
        return {"backward": None, "backward_error": _first_line(e)}
    bwd = box["bwd"]
    poison = kernel_poison.Backward(joint=joint, outputs=box["outputs"], jaxpr=bwd.jaxpr,
                                    names=tuple(names[j] for j in wrt))
    return {"backward": pallas_count.pallas_kernels(bwd),
            "backward_top": pallas_count.top_primitives(bwd), "poison": poison,
            "backward_outside": kernel_outside.measure([bwd], problem, strict=True)
            + kernel_outside.core_missing(bwd, computes, poison.names),
            "joint_outside": kernel_outside.measure([joint], problem, strict=True)}


class Counting(kernel_poison.StandIn):
    """A stand-in for an implementation (:class:`~kernel_harness.run.kernel_poison.
    StandIn`: its name, module, attributes and signature) that traces each call once,
    counts the kernels of the traced program and runs it."""

    def __init__(self, impl: Callable[..., Any], expected: KernelExpectation,
                 product: int | None = None, seen: list[int] | None = None):
        super().__init__(impl, product)
        self._expected = expected
        self._memo: dict[Any, tuple[CallCount, Callable[..., Any]]] = {}
        #: Configurations traced by this implementation and its factory's products (splash
        #: makes one kernel per mask), shared: the core's sampling counts them together.
        self._seen = [0] if seen is None else seen

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        leaves, treedef = jax.tree_util.tree_flatten((args, kwargs))
        dyn = kernel_poison.dynamic(leaves)
        if not dyn:  # a factory: count the callable it makes
            made = self._impl(*args, **kwargs)
            return (Counting(made, self._expected, kernel_poison.next_product(), self._seen)
                    if callable(made) else made)
        program = None
        try:
            count, program = self._count(leaves, treedef, dyn)
        except pallas_count.KernelCountLayoutError:
            raise
        except Exception as e:  # noqa: BLE001 - an uncountable call is reported, not passed
            count = CallCount(forward=0, forward_top=(
                f"(the call could not be traced on abstract values to count: "
                f"{_first_line(e)})",))
        for sink in _sinks():
            sink.append(count)
        values = [leaves[i] for i in dyn]
        if (count.poison is not None and count.poison.wants_inputs()
                and not any(isinstance(v, jax.core.Tracer) for v in values)):
            count.poison.capture(*values)  # concrete: kept now (traced: by the probe)
        if program is None:  # counted as no kernel; a crash here stays the kernel's own
            return self._impl(*args, **kwargs)
        return program(*values)

    def probe(self) -> kernel_poison.Probe:
        """The :class:`~kernel_harness.run.kernel_poison.Probe` of this implementation (the
        same object each time: adapters cache their programs per implementation)."""
        if "_probe" not in self.__dict__:
            self.__dict__["_probe"] = kernel_poison.Probe(self._impl, self._product)
        return self.__dict__["_probe"]

    def _count(self, leaves: list[Any], treedef: Any, dyn: list[int]
               ) -> tuple[CallCount, Callable[..., Any]]:
        # One trace per configuration (a concrete static array, not exact: each call) and
        # per interpreter settings and matmul precision (a drawn DMA schedule is another
        # program; so is interpret's after tpu-interpret's in one process).
        call, exact = kernel_poison.call_key(treedef, leaves, dyn)
        key = (call, settings_in_force())
        if exact and key in self._memo:
            count, program = self._memo[key]
            return dataclasses.replace(count, seconds=0.0), program
        count, program = _trace(self._impl, leaves, treedef, dyn, self._expected,
                                pallas_count.caller_traceback())
        if count.poison is not None:
            count.poison.key = (self._product, call)
            if not kernel_core_value.perturbs(self._seen[0], key):
                count.poison.core = {}
            if how := kernel_eager.sampled(self, key):
                count.poison.eager = (kernel_poison.bound(self._impl, leaves, treedef, dyn),
                                      program, settings_reentry(), how)
        self._seen[0] += 1
        if exact:
            self._memo[key] = (count, program)
        return count, program


def counting(impl: Callable[..., Any], expected: KernelExpectation) -> Counting:
    """The counting wrapper of ``impl`` (the same object for the same ``impl``)."""
    try:
        key: Any = (impl, expected)
        hash(key)
    except TypeError:
        key = (id(impl), expected)
    if key not in _WRAPPERS:
        _WRAPPERS[key] = Counting(impl, expected)
    return _WRAPPERS[key]


def _config_key(wrapper: Counting, family: str, case: Any, backend: str) -> Any:
    static = case.static_key() if hasattr(case, "static_key") else case
    try:
        hash(static)
    except TypeError:
        static = repr(static)
    return (id(wrapper), family, type(case).__name__, static, backend)


@dataclasses.dataclass
class Sink:
    """What :func:`collecting` found: the example's count once the block ends."""

    count: KernelCount | None = None


@contextlib.contextmanager
def collecting(wrapper: Counting, family: str, case: Any, backend: str,
               rerun: Callable[[kernel_poison.Probe], Any] | None = None) -> Iterator[Sink]:
    """Collects the counts of ``wrapper``'s calls while the adapter runs ``case``; after the
    block ``sink.count`` is the example's :class:`KernelCount` (from an earlier example of
    the same configuration when the adapter ran a cached program). Neither: an error.

    Where a new configuration's poisoning still lacks its inputs (traced calls),
    ``rerun(probe)`` runs the adapter again on the same case with ``wrapper.probe()``
    (an error there is the poisoning's, kept in its ``error``); then each is judged."""
    calls: list[CallCount] = []
    sink = Sink()
    _sinks().append(calls)
    kernel_poison.new_run()
    try:
        yield sink
    finally:
        _sinks().remove(calls)
    key = _config_key(wrapper, family, case, backend)
    if calls:
        _BY_CONFIG[key] = tuple(calls)
        _BY_CONFIG.move_to_end(key)
        while len(_BY_CONFIG) > _MAX_CONFIGS:
            _BY_CONFIG.popitem(last=False)
    elif key in _BY_CONFIG:
        calls = [dataclasses.replace(c, seconds=0.0) for c in _BY_CONFIG[key]]
    else:
        raise CountUnavailable(
            f"{family}: the adapter called the implementation nowhere while running this "
            "case, and no earlier example of its configuration was counted: which kernels "
            "ran is unknown")
    pending = [c.poison for c in calls if c.poison is not None and c.poison.wants_inputs()]
    if pending and rerun is not None:
        why = "the probe run never made this call (another configuration key)"
        try:
            with kernel_poison.probing(pending):
                rerun(wrapper.probe())
            jax.effects_barrier()
        except Exception as e:  # noqa: BLE001 - the poisoning judges nothing, and says why
            why = f"the probe run failed: {_first_line(e)}"
        for p in pending:
            if p.inputs is None:
                p.give_up(why)
    for call in calls:
        if call.poison is not None:
            call.poison.settle()
    sink.count = KernelCount.of(calls, sum(c.seconds for c in calls))
