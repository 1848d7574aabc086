"""Whether an implementation computes the same when called eagerly (issue 55, item 2).

The harness runs what it traced (:mod:`kernel_harness.run.kernel_count`): an implementation
that tests whether its inputs are tracers (``isinstance(x, jax.core.Tracer)``) and takes
another path on concrete arrays, as a notebook or a sampling loop without ``jit`` calls it,
shows the harness only its traced path. So for an implementation's first configuration of
each set of input dtypes in a process, and one in :data:`EVERY` after (a stable hash), the
call is made once more directly, on the real inputs the poisoning captured
(:mod:`kernel_harness.run.kernel_poison`), outside any trace, and its outputs are compared
bit for bit (NaN as NaN) with the traced program's evaluated op by op on the same inputs:
both run every primitive alone, so an implementation that does not look at how it is called
gives the same bits.
Forward outputs only (a gradient taken eagerly is not compared).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

import jax
import numpy as np

#: The failure class, as reports and events name it.
EAGER = "behaves otherwise when called eagerly"
#: The event of an example whose configuration was called eagerly with the same result.
EAGER_SAME = "called eagerly: the traced program's bits"
#: An implementation's first configuration of each set of input dtypes in a process is
#: called eagerly, then one in EVERY (a stable hash): each costs a run of the implementation
#: and of its program.
EVERY = 16


_WANTED: contextvars.ContextVar[bool] = contextvars.ContextVar("kernel_harness_eager",
                                                               default=False)


@contextlib.contextmanager
def wanted(on: bool) -> Iterator[None]:
    """Within the block, configurations traced for the first time may be called eagerly
    (:func:`sampled`): matches-reference asks it for the first example of each compiled
    program; the golden check, the gate and the relations' runs do not (each direct call
    costs a compile and two runs of the implementation)."""
    token = _WANTED.set(on)
    try:
        yield
    finally:
        _WANTED.reset(token)


def sampled(wrapper: Any, dtypes: tuple[str, ...], key: Any) -> bool:
    """Whether configuration ``key`` of ``wrapper`` (a counting stand-in), whose traced
    inputs have ``dtypes``, is called eagerly: the first of its dtypes (an eager path may
    take another precision for one dtype only: round 6's rounded float32 logits to the
    bfloat16 grid, which leaves bfloat16 inputs as they were), then one in EVERY."""
    if not _WANTED.get():
        return False
    seen = wrapper.__dict__.setdefault("_eager_dtypes", set())
    first = dtypes not in seen
    seen.add(dtypes)
    return first or zlib.crc32(repr(key).encode()) % EVERY == 7


@dataclasses.dataclass(frozen=True)
class EagerVerdict:
    """A direct call compared: ``changed``, what it returned otherwise than the traced
    program (its class's failure); ``program_changed``, what the traced program run twice
    did not reproduce bit for bit (then ``changed`` is not judged: a nondeterministic
    program, the ``nondeterministic`` class's failure unless the family declares it)."""

    changed: tuple[str, ...] = ()
    program_changed: tuple[str, ...] = ()


def merged(poisons: Sequence[Any]) -> EagerVerdict | None:
    """An example's verdict from its configurations' poisonings (None: no call of its
    configurations was compared)."""
    judged = [p.eager_verdict for p in poisons if p.eager_verdict is not None]
    if not judged:
        return None
    return EagerVerdict(*(tuple(dict.fromkeys(c for v in judged for c in getattr(v, f.name)))
                     for f in dataclasses.fields(EagerVerdict)))


def changes(direct: Callable[..., Any], program: Callable[..., Any],
            settings: Callable[[], AbstractContextManager[None]],
            inputs: Sequence[np.ndarray], names: Sequence[str]) -> EagerVerdict:
    """The :class:`EagerVerdict` of the direct call against the traced program, both on
    ``inputs`` with their floating data drawn anew (:func:`_drawn`):
    a line per output leaf (named by ``names``, the call's result leaves) that differs,
    ``result: 12 of 4096 element(s) differ (bitwise), largest |difference| 0.0031``. Both
    run under ``settings()`` (the interpreter settings and matmul precision the call was
    traced under: :func:`kernel_harness.core.compat.settings_reentry`). Where they differ,
    the program runs once more: differing from itself, it is nondeterministic."""
    values = _drawn(inputs)

    def fresh() -> list[jax.Array]:  # each call its own arrays: a kernel may donate them
        return [jax.device_put(x) for x in values]

    with settings():
        eager = jax.tree_util.tree_leaves(direct(*fresh()))
        traced = jax.tree_util.tree_leaves(program(*fresh()))
        if len(eager) != len(traced):
            return EagerVerdict((f"the result has {len(eager)} array(s) called eagerly, "
                            f"{len(traced)} traced",))
        found = _differences(eager, traced, names, "differ")
        again = (_differences(traced, jax.tree_util.tree_leaves(program(*fresh())), names,
                              "changed") if found else ())
    # Run between a first run and the bitwise rerun, these calls could put a program whose
    # values alternate back in step: so its nondeterminism is named here too.
    return EagerVerdict(program_changed=again) if again else EagerVerdict(found)


def _drawn(inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The inputs the direct call and the program get: each floating one replaced by
    standard normal data of its shape and dtype (a fixed seed), the others (lengths,
    indices, segment ids) as the call had them. A case's own floating data can hide a
    difference (a seed case of masked rows, whose softmax is one-hot whatever the logits'
    precision: round 6's eager path passed there); any data shows an honest
    implementation's two runs agree."""
    rng = np.random.default_rng(0)
    out = []
    for x in inputs:
        x = np.asarray(x)
        if jax.numpy.issubdtype(x.dtype, jax.numpy.floating):
            x = rng.standard_normal(x.shape).astype(np.float32).astype(x.dtype)
        out.append(x)
    return out


_NOUN = {"differ": "difference", "changed": "change"}


def _differences(eager: list[Any], traced: list[Any], names: Sequence[str], verb: str
                 ) -> tuple[str, ...]:
    found = []
    for i, (a, b) in enumerate(zip(eager, traced, strict=True)):
        a, b = np.asarray(a), np.asarray(b)
        name = (names[i] if i < len(names) else "") or f"result leaf {i}"
        if a.shape != b.shape or a.dtype != b.dtype:
            found.append(f"{name}: {a.dtype}{list(a.shape)} called eagerly, "
                         f"{b.dtype}{list(b.shape)} traced")
            continue
        same = (a == b) | (np.isnan(a) & np.isnan(b)) if a.dtype.kind in "fc" else a == b
        if not np.all(same):
            diff = np.where(same, 0.0, np.abs(a.astype(np.float64) - b.astype(np.float64)))
            finite = diff[np.isfinite(diff)]
            largest = f"{float(finite.max()):.3g}" if finite.size else "nan"
            found.append(f"{name}: {int((~same).sum())} of {a.size} element(s) {verb} "
                         f"(bitwise), largest |{_NOUN[verb]}| {largest}")
    return tuple(found)


def problem_text(changed: Sequence[str]) -> str:
    """The failure's words: what differed between the eager call and the traced program."""
    return ("called directly, outside any trace (as code without jit calls it), the "
            "implementation returned other values than the program it traces to, both on "
            "the call's inputs with their floating data drawn anew: " + "; ".join(changed)
            + " (every primitive runs alone both ways: an implementation that does not test "
            "how it is called gives the same bits)")
