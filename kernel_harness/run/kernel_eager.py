"""Whether an implementation computes the same when called eagerly (issue 55, item 2).

The harness runs what it traced (:mod:`kernel_harness.run.kernel_count`): an implementation
that tests whether its inputs are tracers (``isinstance(x, jax.core.Tracer)``, or a
concrete array's attribute a tracer lacks) and takes another path on concrete arrays, as a
notebook or a sampling loop without ``jit`` calls it, shows the harness only its traced
path. So where matches-reference asks (:func:`wanted`: the first example of each compiled
program), an implementation's first configuration in a process, and one in :data:`EVERY`
after (a stable hash), is called once more directly, outside any trace, and its outputs
are compared bit for bit (NaN as NaN) with the traced program's evaluated op by op: both
run every primitive alone, so an implementation that does not look at how it is called
gives the same bits. Both get the call's inputs with their floating data drawn anew
(:func:`drawn`), under the settings the call was traced under
(:func:`kernel_harness.core.compat.reentry.settings_reentry`).

The comparison runs after the example's bitwise rerun (:func:`judged`), so its runs never
come between the two runs the rerun compares. Elements that differ between two runs of the
program itself (garbage a kernel leaves outside its contract, a nondeterministic kernel:
the rerun's to name) are not judged. Forward outputs only (a gradient taken eagerly is not
compared).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import threading
import weakref
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

import jax
import numpy as np

from kernel_harness.core.case import standard_normal
from kernel_harness.run import rerun

#: The failure class, as reports and events name it.
EAGER = "behaves otherwise when called eagerly"
#: The event of an example whose configuration was called eagerly with the same result.
EAGER_SAME = "called eagerly: the traced program's bits"
#: The event of one whose program itself varies in some elements (not judged there).
EAGER_UNSTABLE = "called eagerly: elements that vary between runs of the program not judged"
#: An implementation's first configuration in a process is called eagerly, then one in
#: EVERY (a stable hash): each costs a compile and two or three runs of the implementation.
EVERY = 16

_WANTED: contextvars.ContextVar[bool] = contextvars.ContextVar("kernel_harness_eager",
                                                               default=False)
_LOCAL = threading.local()
#: The counting stand-ins whose first configuration was called eagerly in this process.
_CALLED: weakref.WeakSet[Any] = weakref.WeakSet()


@dataclasses.dataclass(frozen=True)
class EagerVerdict:
    """A direct call compared: ``changed``, a line per output leaf it returned otherwise than
    the traced program (the class's failure); ``unstable``, a line per leaf with elements
    that two runs of the program did not reproduce (not judged there)."""

    changed: tuple[str, ...] = ()
    unstable: tuple[str, ...] = ()


@contextlib.contextmanager
def wanted(on: bool) -> Iterator[None]:
    """Within the block, configurations traced for the first time may be called eagerly
    (:func:`sampled`); each is judged by :func:`judged` afterwards. matches-reference asks
    it for the first example of each compiled program; the golden check, the gate,
    large-sizes and the relations' runs do not (each direct call costs a compile and runs)."""
    _LOCAL.pending = []  # what an earlier example left unjudged (it raised) is dropped
    token = _WANTED.set(on)
    try:
        yield
    finally:
        _WANTED.reset(token)


#: :func:`sampled`'s answers: the implementation's first configuration in the process
#: (called twice, the second time on a nudged input: :func:`changes`), or a later one.
FIRST, LATER = "first", "later"


def sampled(wrapper: Any, key: Any) -> str | None:
    """Whether configuration ``key`` of ``wrapper`` (a counting stand-in) is called eagerly
    (:data:`FIRST` or :data:`LATER`, else None): its first in the process, then one in
    EVERY. (The first of each set of input dtypes, tried first, cost the suite's
    tests/families and tests/run 19%: 261 s became 310 s.)"""
    if not _WANTED.get():
        return None
    first = wrapper not in _CALLED
    _CALLED.add(wrapper)
    if first:
        return FIRST
    return LATER if zlib.crc32(repr(key).encode()) % EVERY == 7 else None


def forget() -> None:
    """Every implementation's next configuration is its first again (a test that must see
    the first call, whatever ran before it in the process)."""
    _CALLED.clear()


def defer(poison: Any, call: tuple[Callable[..., Any], ...], inputs: Sequence[Any]) -> None:
    """Keeps ``poison``'s direct call (``(direct, program, settings)``) and the call's
    inputs until :func:`judged` (the poisoning's ``eager_verdict`` is set then)."""
    pending = _LOCAL.__dict__.setdefault("pending", [])
    pending.append((poison, call, [np.asarray(x) for x in inputs]))


def judged(count: Any) -> Any:
    """Judges the deferred direct calls of this thread, and returns ``count`` (the example's
    ``KernelCount``, or None) with their verdicts merged into its ``eager``."""
    pending, _LOCAL.pending = _LOCAL.__dict__.get("pending", []), []
    for poison, (direct, program, settings, *how), inputs in pending:
        try:
            poison.eager_verdict = changes(direct, program, settings, inputs, poison.out_names,
                                           nudge=not how or how[0] == FIRST)
        except Exception as e:  # noqa: BLE001 - traced it ran: a failure of its class
            poison.eager_verdict = EagerVerdict(
                (f"the direct call raised {type(e).__name__}: {str(e).strip()[:200]}",))
    if count is None or not pending:
        return count
    return dataclasses.replace(count, eager=merged(
        [count.eager, *(p.eager_verdict for p, _, _ in pending)]))


def merged(verdicts: Sequence[EagerVerdict | None]) -> EagerVerdict | None:
    """One verdict from several (None: none was made)."""
    made = [v for v in verdicts if v is not None]
    if not made:
        return None
    return EagerVerdict(*(tuple(dict.fromkeys(c for v in made for c in getattr(v, f.name)))
                          for f in dataclasses.fields(EagerVerdict)))


def changes(direct: Callable[..., Any], program: Callable[..., Any],
            settings: Callable[[], AbstractContextManager[None]],
            inputs: Sequence[np.ndarray], names: Sequence[str], nudge: bool = True
            ) -> EagerVerdict:
    """The :class:`EagerVerdict` of the direct call against the traced program, both on
    ``inputs`` with their floating data drawn anew (:func:`drawn`) and under
    ``settings()``: a line per output leaf (named by ``names``, the call's result leaves)
    that differs, ``result: 12 of 4096 element(s) differ (bitwise), largest |difference|
    0.0031``. Where they differ the program runs once more, and the elements it does not
    reproduce are left out of the comparison. Then (``nudge``: the implementation's first
    configuration in the process) once more on the same data with one element of each
    floating input changed (:func:`nudged`): a direct call that answers from what an
    earlier call left (a memo keyed on a few sampled elements: round 9 of the adversarial
    set) returns the earlier answer there."""
    values = drawn(inputs)
    first = _compare(direct, program, settings, values, names)
    if first.changed or not nudge:
        return first
    second = _compare(direct, program, settings, nudged(values), names)
    return merged([first, EagerVerdict(
        tuple(f"a second direct call, one input element changed: {c}" for c in second.changed),
        second.unstable)])


def _compare(direct: Callable[..., Any], program: Callable[..., Any],
             settings: Callable[[], AbstractContextManager[None]],
             values: Sequence[np.ndarray], names: Sequence[str]) -> EagerVerdict:
    def fresh() -> list[jax.Array]:  # each call its own arrays: a kernel may donate them
        return [jax.device_put(x) for x in values]

    with settings():
        eager = [np.asarray(x) for x in jax.tree_util.tree_leaves(direct(*fresh()))]
        traced = [np.asarray(x) for x in jax.tree_util.tree_leaves(program(*fresh()))]
        if len(eager) != len(traced):
            return EagerVerdict((f"the result has {len(eager)} array(s) called eagerly, "
                                 f"{len(traced)} traced",))
        found = _differences(eager, traced, names)
        if not found:
            return EagerVerdict()
        again = [np.asarray(x) for x in jax.tree_util.tree_leaves(program(*fresh()))]
    stable = [rerun.bitwise_same(t, a) if t.shape == a.shape else np.zeros(t.shape, bool)
              for t, a in zip(traced, again, strict=True)]
    unstable = tuple(f"{_name(names, i)}: {int((~s).sum())} of {s.size} element(s)"
                     for i, s in enumerate(stable) if not s.all())
    return EagerVerdict(_differences(eager, traced, names, stable), unstable)


def nudged(values: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``values`` with one element of each floating array moved by 0.5, at a place no
    power-of-two stride from the start lands on (an odd offset past seven thirteenths)."""
    out = []
    for x in values:
        x = np.array(x)
        if jax.numpy.issubdtype(x.dtype, jax.numpy.floating) and x.size:
            flat = x.reshape(-1)
            i = min((x.size * 7) // 13 | 1, x.size - 1)
            flat[i] = (flat[i].astype(np.float32) + 0.5).astype(x.dtype)
        out.append(x)
    return out


def drawn(inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The inputs the direct call and the program get (and the core's perturbation, where
    the case's own data cancelled it: :mod:`kernel_harness.run.kernel_poison`): each
    floating one replaced by
    standard normal data of its shape and dtype (a fixed seed), the others (lengths,
    indices, segment ids) as the call had them. A case's own floating data can hide a
    difference (a seed case of masked rows, whose softmax is one-hot whatever the logits'
    precision: round 6's eager path passed there); any data shows an honest
    implementation's two runs agree."""
    rng = np.random.default_rng(0)
    return [standard_normal(rng, x.shape, str(x.dtype))
            if jax.numpy.issubdtype(x.dtype, jax.numpy.floating) else x
            for x in map(np.asarray, inputs)]


def _name(names: Sequence[str], i: int) -> str:
    return (names[i] if i < len(names) else "") or f"result leaf {i}"


def _differences(eager: list[np.ndarray], traced: list[np.ndarray], names: Sequence[str],
                 judged_where: list[np.ndarray] | None = None) -> tuple[str, ...]:
    found = []
    for i, (a, b) in enumerate(zip(eager, traced, strict=True)):
        if a.shape != b.shape or a.dtype != b.dtype:
            found.append(f"{_name(names, i)}: {a.dtype}{list(a.shape)} called eagerly, "
                         f"{b.dtype}{list(b.shape)} traced")
            continue
        line = rerun.differing(_name(names, i), a, b, "differ", "difference",
                               None if judged_where is None else judged_where[i])
        if line:
            found.append(line)
    return tuple(found)


def problem_text(changed: Sequence[str]) -> str:
    """The failure's words: what differed between the eager call and the traced program."""
    return ("called directly, outside any trace (as code without jit calls it), the "
            "implementation returned other values than the program it traces to, both on "
            "the call's inputs with their floating data drawn anew: " + "; ".join(changed)
            + " (every primitive runs alone both ways: an implementation that does not test "
            "how it is called gives the same bits)")
