"""What keeps ``kernel-harness bench`` from being fooled.

A benchmark that times one set of inputs over and over, and never looks at what came
back, rewards an implementation that remembers its last result (per shape, per input
buffer, per input content) instead of computing it. So every call of the timed program,
warm-up calls included, gets its own input set (:func:`call_inputs`): the benchmark case
with its own seed, drawn and placed on the device before the clock starts, never seen by
an earlier call nor by the correctness pre-check (seed 0). The timed call's results are
blocked on inside the timing (:func:`time_calls`), and the results of the last
:data:`JUDGED_CALLS` calls are then judged (:func:`judge_timed`) against the family's
reference for their own inputs, by the judge ``check`` uses
(:func:`kernel_harness.core.judges.judge_output` over
:func:`kernel_harness.records.outputs.judged_outputs`): a failure is
:data:`REPEATED` where the wrong output is bit-identical to the same output of another,
distinct input set, else :data:`WRONG`. The Pallas kernels of the timed program itself
are counted in its jaxpr (:func:`timed_kernels`, the count ``check`` uses) and judged
against ``Family.kernels``: :data:`FEW_KERNELS`.
"""

from __future__ import annotations

import collections
import dataclasses
import time
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from kernel_harness.core.backends import Backend
from kernel_harness.core.case import Arrays
from kernel_harness.core.compat import pallas_count
from kernel_harness.core.judges import judge_output
from kernel_harness.records.bench import Timed
from kernel_harness.records.family import Family
from kernel_harness.records.kernels import declared_fallback
from kernel_harness.records.outputs import judged_outputs
from kernel_harness.run.runner import MAGNITUDE_SUFFIX, low_precision_outputs

#: How many of the last calls of the timed program have their results judged (two: a
#: result repeated across distinct inputs shows between them).
JUDGED_CALLS = 2

#: The classes of a benchmark that does not stand.
REPEATED = "result repeated across distinct inputs"
WRONG = "result wrong on the benchmarked inputs"
FEW_KERNELS = "timed program ran fewer Pallas kernels than expected"


def case_of_call(case: Any, call: int) -> Any:
    """The case whose inputs call number ``call`` (0-based, warm-up calls first) of the
    timed program gets: ``case`` with seed ``case.seed + 1 + call``, so no two calls, and
    no call and the pre-check of ``case``, share an input set."""
    return dataclasses.replace(case, seed=case.seed + 1 + call)


def call_inputs(case: Any, timed: Timed, backend: Backend) -> Callable[[int], Arrays]:
    """``inputs(call)``: the arrays ``timed`` reads for call number ``call``
    (:func:`case_of_call`), on the backend's device."""
    def inputs(call: int) -> Arrays:
        arrays = case_of_call(case, call).materialize()
        return {n: jax.device_put(arrays[n], backend.device) for n in timed.inputs}

    return inputs


@dataclasses.dataclass(frozen=True)
class Calls:
    """The timed calls' seconds, and the last calls' results as ``(call, results)``."""

    samples: list[float]
    kept: list[tuple[int, Any]]


def time_calls(call: Callable[[Any], Any], inputs: Callable[[int], Any], *, warmup: int,
               iters: int, max_seconds: float, keep: int = JUDGED_CALLS,
               clock: Callable[[], float] = time.perf_counter) -> Calls:
    """``warmup`` untimed calls, then up to ``iters`` timed ones, stopping early (after at
    least one) once ``max_seconds`` of timed calls have passed. Call number ``i`` gets
    ``inputs(i)``, made and blocked on before the clock starts; the clock stops once the
    call's results are ready (``jax.block_until_ready``). Keeps the last ``keep`` calls'
    results."""
    kept: collections.deque[tuple[int, Any]] = collections.deque(maxlen=keep)
    samples: list[float] = []

    def one(i: int) -> float:
        args = jax.block_until_ready(inputs(i))
        start = clock()
        out = jax.block_until_ready(call(args))
        elapsed = clock() - start
        kept.append((i, out))
        return elapsed

    for i in range(warmup):
        one(i)
    while len(samples) < iters and (not samples or sum(samples) < max_seconds):
        samples.append(one(warmup + len(samples)))
    return Calls(samples=samples, kept=list(kept))


def timed_kernels(timed: Timed, args: Arrays) -> int:
    """The Pallas kernels in the jaxpr of the timed program on ``args``' shapes (forward,
    and backward where the mode times it), counted as ``check`` counts them."""
    return pallas_count.pallas_kernels(jax.make_jaxpr(timed.fn)(args))


def kernels_problem(family: Family, impl: Callable[..., Any] | None, mode: str,
                    count: int) -> str:
    """Why the timed program's ``count`` of Pallas kernels does not stand ("" if it does:
    enough for ``Family.kernels`` in ``mode``, a declared fallback, or a family whose
    kernel is XLA or torch by design)."""
    expected = family.kernels
    if expected is None or declared_fallback(impl or family.kernel) is not None:
        return ""
    need = expected.forward + (expected.backward if mode == "fwd+bwd" else 0)
    if count >= need:
        return ""
    return f"{FEW_KERNELS}: {count} in the {mode} program (expected >= {need})"


@dataclasses.dataclass(frozen=True, kw_only=True)
class ResultsVerdict:
    """The judgement of the timed program's results: ``problem`` is "" (they passed),
    :data:`REPEATED` or :data:`WRONG`; ``text`` says which calls and outputs."""

    problem: str
    text: str
    calls: tuple[int, ...]

    @property
    def passed(self) -> bool:
        """Whether every judged result stood."""
        return not self.problem


def _named(timed: Timed, results: Any) -> dict[str, np.ndarray]:
    leaves = jax.tree_util.tree_leaves(results)
    if len(leaves) != len(timed.outputs):
        raise ValueError(f"the timed program returned {len(leaves)} arrays but its hook "
                         f"names {len(timed.outputs)}: {timed.outputs}")
    return {name: np.asarray(x) for name, x in zip(timed.outputs, leaves, strict=True)}


def judge_timed(family: Family, case: Any, timed: Timed, backend: Backend,
                kept: list[tuple[int, Any]]) -> ResultsVerdict:
    """Judges each kept ``(call, results)`` against the family's reference on that call's
    inputs (:func:`case_of_call`) with the family's judge and tolerances."""
    unknown = [n for n in timed.outputs if n not in family.output_axes]
    if unknown:
        raise ValueError(f"the bench hook names {unknown}, not outputs of {family.name} "
                         f"({', '.join(family.output_axes)})")
    named = {call: _named(timed, results) for call, results in kept}
    failures: list[tuple[int, str, str]] = []
    judged = 0
    for call, outs in named.items():
        c = case_of_call(case, call)
        inputs = c.materialize()
        expected = family.reference(c, inputs)
        lowp = low_precision_outputs(family, c, inputs, backend)
        for out in judged_outputs(family, c, same_as=False):
            if out.name not in outs:
                continue
            judged += 1
            verdict = judge_output(
                out, outs[out.name], np.asarray(expected[out.reference]),
                magnitude=expected.get(f"{out.reference}{MAGNITUDE_SUFFIX}"),
                lowp=None if lowp is None else lowp.get(out.reference))
            if not verdict.passed:
                failures.append((call, out.name, "; ".join(verdict.problems)))
    if not judged:
        raise ValueError(f"none of the timed outputs {timed.outputs} is compared for this "
                         f"{family.name} case")
    calls = tuple(named)
    seeds = ", ".join(str(case_of_call(case, c).seed) for c in calls)
    if not failures:
        return ResultsVerdict(problem="", text=f"pass ({judged} outputs of {len(calls)} "
                              f"timed call(s) on seeds {seeds})", calls=calls)
    repeated = [(call, name) for call, name, _ in failures
                if any(other != call and np.array_equal(outs[name], named[call][name])
                       for other, outs in named.items())]
    if repeated:
        call, name = repeated[0]
        return ResultsVerdict(problem=REPEATED, calls=calls, text=(
            f"{REPEATED}: `{name}` is bit-identical on seeds {seeds} and wrong on seed "
            f"{case_of_call(case, call).seed}"))
    call, name, why = failures[0]
    return ResultsVerdict(problem=WRONG, calls=calls, text=(
        f"{WRONG}: `{name}` on seed {case_of_call(case, call).seed}: {why[:300]}"
        + (f" (+{len(failures) - 1} more failing output(s))" if len(failures) > 1 else "")))
