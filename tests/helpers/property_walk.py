"""Walking every property of a family through its draws without running its kernel (issue 56).

A property's Hypothesis errors (``FailedHealthCheck``, ``Unsatisfiable``, ``InvalidArgument``,
``FlakyStrategyDefinition``...) come from its builder (the probes that decide a SKIP), its
strategy and what its body draws or rejects before it calls the kernel: every metamorphic
body draws and assumes first, then runs. :func:`walk_property` builds the property as
``check`` does and runs it with :func:`run_property` under a profile's settings, with the
calls that run or trace the kernel (``check_case``, ``run_counted``, ``lower_case``,
``size_programs.traced_at``) replaced by a stop: an example that gets there has drawn its
case and everything it draws before the kernel, and ends there as a pass. Everything before the
kernel runs for real, the builders' probes included (lowering: see ``lower``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Iterator
from typing import Any
from unittest import mock

from kernel_harness.checks import lowering, size_programs
from kernel_harness.checks import matches_reference as matches
from kernel_harness.checks.metamorphic import machinery
from kernel_harness.checks.metamorphic.op_relations import spec_for
from kernel_harness.checks.properties import Observer, build_property, run_property
from kernel_harness.core.backends import BackendUnavailable, resolve_backend
from kernel_harness.core.errors import PropertyNotApplicable
from kernel_harness.records.family import Family
from kernel_harness.run.profiles import draws_per_compile, get_profile

#: Hypothesis judges its health checks on the first 10 valid examples of a run (at most 50
#: rejected before them, 20 overruns): a walk of that many examples meets every health
#: check the property's run would.
HEALTH_CHECK_WINDOW = 10


class _ReachedKernel(BaseException):
    """An example got to the kernel call (a BaseException: no ``except Exception`` of
    the property turns it into a crash report)."""


def _stop(*args: Any, **kwargs: Any) -> Any:
    raise _ReachedKernel


@dataclasses.dataclass
class Step:
    """One property of one (narrowed) family: ``verdict`` is ``drew`` (its examples got to
    the kernel or ended before it, none failed), ``SKIP`` (``detail``: the builder's
    reason), or ``ERROR`` (``detail``: what was raised, which a user's run would have
    shown instead of a verdict)."""

    prop: str
    backend: str
    verdict: str
    detail: str = ""
    examples: int = 0  # examples that ended normally (not rejected)
    reached: int = 0  # calls that got to the kernel (a real lowering: rejected ones too)
    error: BaseException | None = None


def _lowers(family: Family, case: Any, impl: Any = None) -> lowering.LoweringResult:
    return lowering.LoweringResult(family=family.name, case=case, ok=True, error=None,
                                   seconds=0.0, custom_calls=1)


@contextlib.contextmanager
def _stubbed(stubs: dict[tuple[Any, str], Any]) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        for (module, name), stub in stubs.items():
            stack.enter_context(mock.patch.object(module, name, stub))
        yield


def backend_for(family: Family, prop: str) -> str:
    """``tpu-interpret`` for a property that varies the TPU interpreter's schedule, else
    ``interpret``."""
    spec = spec_for(family, prop)
    return ("tpu-interpret" if spec is not None and spec.needs == machinery.TPU_INTERPRETER
            else "interpret")


def walk_property(family: Family, prop: str, *, profile: str = "ci",
                  max_examples: int | None = HEALTH_CHECK_WINDOW,
                  modes_first: bool = False, lower: bool = False) -> Step:
    """Builds ``prop`` for ``family`` and runs its draws under ``profile`` (its example
    count, capped at ``max_examples``; None: uncapped), the kernel stubbed out.

    ``lower``: lowering is real (tracing for TPU, nothing runs): ``lowers-for-tpu``'s
    builder lowers its first case to see whether tracing asks the TPU generation (a SKIP)
    and each example lowers its case (one that asks it is rejected, as in a real run).
    Else every case "lowers" unseen: the builder's and the examples' draws still run."""
    name = backend_for(family, prop)
    try:
        backend = resolve_backend(name)
        with _stubbed({} if lower else {(lowering, "lower_case"): _lowers}):
            built = build_property(prop, family, backend=backend,
                                   draws_per_compile=draws_per_compile(profile))
    except (PropertyNotApplicable, BackendUnavailable) as e:
        return Step(prop, name, "SKIP", str(e))
    except Exception as e:  # noqa: BLE001 - the walk reports it
        return Step(prop, name, "ERROR", f"building: {type(e).__name__}: {e}", error=e)
    step = Step(prop, name, "drew")
    inner = built.hypothesis.inner_test

    @functools.wraps(inner)  # the same derandomized draws as the property's own run
    def stubbed(*args: Any, **kwargs: Any) -> None:
        try:
            inner(*args, **kwargs)
        except _ReachedKernel:
            step.reached += 1
        step.examples += 1

    real_lower = lowering.lower_case

    def lowered(*args: Any, **kwargs: Any) -> Any:
        step.reached += 1
        return real_lower(*args, **kwargs)

    built.hypothesis.inner_test = stubbed
    settings = get_profile(profile)
    count = machinery.example_cap(built, settings.max_examples)
    stubs = {(matches, "check_case"): _stop, (machinery, "run_counted"): _stop,
             (size_programs, "traced_at"): _stop,
             (lowering, "lower_case"): lowered if lower else _stop}
    with _stubbed(stubs):
        outcome = run_property(
            prop, family, built, backend=backend, observer=Observer(), profile=settings,
            max_examples=count if max_examples is None else min(count, max_examples),
            modes_first=modes_first)
    if outcome.error is not None:
        step.verdict, step.error = "ERROR", outcome.error
        step.detail = f"{type(outcome.error).__name__}: {outcome.error}"
    return step


def walk(family: Family, props: tuple[str, ...], **options: Any) -> list[Step]:
    """:func:`walk_property` of each of ``props``."""
    return [walk_property(family, p, **options) for p in props]


def problems(steps: list[Step], where: str) -> list[str]:
    """One line per step that neither drew (with at least one example) nor SKIPped with a
    reason."""
    out = []
    for s in steps:
        if s.verdict == "ERROR":
            out.append(f"{where} {s.prop} ({s.backend}): {s.detail[:800]}")
        elif s.verdict == "SKIP" and not s.detail.strip():
            out.append(f"{where} {s.prop}: SKIP without a reason")
        elif s.verdict == "drew" and not s.examples:
            out.append(f"{where} {s.prop}: no example ran")
    return out
