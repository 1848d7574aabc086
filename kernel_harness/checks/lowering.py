"""TPU lowering check on CPU: does each drawn configuration lower for a real TPU?

Interpret mode accepts block shapes a real TPU rejects. Lowering a family's
kernel (forward and backward, as its ``traceable`` hook builds them with
``interpret=False``) for the ``tpu`` platform runs Pallas' Mosaic lowering on
this machine, no TPU needed, and fails where the TPU compiler's front end
would (block shapes not (8, 128)-aligned, unsupported layouts...). Checks the
Mosaic compiler itself runs later, on the device, are out of reach here.

``lowers-for-tpu`` is a property over the family's strategy (its strategies
must only draw configurations that lower); ``kernel-harness lower FAMILY``
prints a table of the configurations drawn and why any failed.
"""

from __future__ import annotations

import dataclasses
import shlex
import time
from collections.abc import Callable
from typing import Any

import hypothesis
import jax
from hypothesis import given

from kernel_harness.core import compat
from kernel_harness.core.backends import Backend, running_on
from kernel_harness.core.errors import PropertyNotApplicable
from kernel_harness.records import registry
from kernel_harness.records.family import Family

#: The backend handed to ``traceable`` for lowering: compiled (``interpret=False``).
TPU_LOWERING = Backend(name="tpu", platform="tpu", note="lowered on this machine, not run")


@dataclasses.dataclass(frozen=True)
class LoweringResult:
    """Whether one case's kernels lowered for TPU, and if not, why."""

    family: str
    case: Any
    ok: bool
    error: str | None
    seconds: float
    custom_calls: int
    #: The kernel asked the local device's TPU generation while tracing: on a machine
    #: without a TPU that cannot be answered, so the case is not checkable here (neither
    #: a pass nor a failure; reported as such).
    needs_tpu: bool = False

    def describe(self) -> str:
        summary = getattr(self.case, "shape_summary", None)
        what = summary() if callable(summary) else repr(self.case)
        if self.needs_tpu:
            return f"NOT CHECKABLE here: {self.error}\n    case: {self.case.to_json()}"
        if self.ok:
            return f"lowers ({self.custom_calls} Mosaic kernel(s), {self.seconds:.2f}s): {what}"
        return f"does NOT lower: {self.error}\n    case: {self.case.to_json()}"


#: The error a kernel raises when tracing asks the TPU generation of a non-TPU device.
NEEDS_TPU_DEVICE = "Unsupported TPU device kind"


class LoweringFailure(AssertionError):
    """A configuration drawn by the family's strategy does not lower for TPU."""


def traceable_of(family: Family) -> Callable[..., Any]:
    """The family's ``traceable`` hook; PropertyNotApplicable where it has none, or where
    the family does not run with this installation (its kernel library missing, or a jax
    without what the kernel calls: it would not trace either)."""
    if not family.backends:
        raise PropertyNotApplicable(
            f"{family.name} does not run with this installation (needs {family.requires}): "
            "its kernel is not lowered here")
    hooks = family.metamorphic
    if hooks is None or hooks.traceable is None:
        raise PropertyNotApplicable(
            f"{family.name} has no traceable hook (Family.metamorphic.traceable): its kernel "
            "cannot be lowered for TPU by the harness"
        )
    return hooks.traceable


def lower_case(family: Family, case: Any, impl: Callable[..., Any] | None = None
               ) -> LoweringResult:
    """Lowers ``case``'s forward + backward program for the TPU platform."""
    traceable = traceable_of(family)
    inputs = case.materialize()
    shapes = {k: jax.ShapeDtypeStruct(v.shape, v.dtype) for k, v in inputs.items()}
    start = time.perf_counter()
    try:
        with running_on(TPU_LOWERING):  # the implementation is traced for a TPU
            fn = traceable(impl, case, TPU_LOWERING)
            text = compat.lower_for_platform(fn, (shapes,), "tpu",
                                             device_kind=family.metamorphic.tpu_device_kind)
    except Exception as e:  # noqa: BLE001 - the reason is the result
        message = str(e).strip().splitlines()
        reason = f"{type(e).__name__}: {message[0] if message else ''}"
        return LoweringResult(family=family.name, case=case, ok=False, error=reason[:600],
                              seconds=time.perf_counter() - start, custom_calls=0,
                              needs_tpu=NEEDS_TPU_DEVICE in reason)
    return LoweringResult(family=family.name, case=case, ok=True, error=None,
                          seconds=time.perf_counter() - start,
                          custom_calls=text.count("tpu_custom_call"))


def _first_case(family: Family) -> Any:
    """The family's first seed case, else its strategy's first draw: Hypothesis starts
    from the simplest choice at every draw, so this is the strategy's simplest case. Not
    shrunk further: any case tells whether tracing asks the TPU generation, and shrinking
    a "find anything" search took 1.6 to 3.6 s per narrowed sdpa family (2026-12-05),
    mostly to return the same case."""
    seeds = list(family.seed_cases(family.without))
    if seeds:
        return seeds[0]
    return hypothesis.find(family.cases(), lambda case: True, settings=hypothesis.settings(
        database=None, max_examples=1, phases=[hypothesis.Phase.generate],
        suppress_health_check=list(hypothesis.HealthCheck)))


def check_lowerable_here(family: Family, impl: Callable[..., Any] | None = None) -> None:
    """PropertyNotApplicable (a SKIP saying why) where tracing the family's first case
    for TPU asks the TPU generation, which a machine without a TPU cannot answer: every
    drawn case would be rejected, so the property could say nothing here."""
    result = lower_case(family, _first_case(family), impl)
    if result.needs_tpu:
        raise PropertyNotApplicable(
            f"not checkable here: tracing {family.name}'s kernel for TPU asks the TPU "
            f"generation ({result.error}); run it where a TPU is, or set "
            "Metamorphic.tpu_device_kind to the TPU to lower for")


def lowers_for_tpu(family: Family, *, backend: Backend, impl: Callable[..., Any] | None = None,
                   impl_spec: str | None = None, observer: Any = None) -> Callable[[], None]:
    """The property "every configuration the strategy draws lowers for TPU" (the
    backend is irrelevant: nothing runs); a SKIP where the kernel's trace needs a TPU
    (:func:`check_lowerable_here`)."""
    traceable_of(family)
    check_lowerable_here(family, impl)

    @given(case=family.cases())
    def prop(case: Any) -> None:
        result = lower_case(family, case, impl)
        if result.needs_tpu:  # not checkable without a TPU: counted, never passed
            hypothesis.event("not checkable here: tracing asks the TPU device kind")
            if observer is not None:
                observer.rejected += 1
            hypothesis.reject()
        hypothesis.event("lowers" if result.ok else "does not lower")
        if family.metamorphic.tpu_device_kind is not None:
            hypothesis.event(f"lowered for {family.metamorphic.tpu_device_kind}")
        if observer is not None:  # every example that ran counts; passed only if it did
            observer.record_check(case, result.seconds)
            observer.end_example(result.ok)
        if not result.ok:
            command = ["kernel-harness", "lower", family.name, "--case", case.to_json(),
                       *(["--impl", impl_spec] if impl_spec else []),
                       *registry.family_module_args(family.name)]
            raise LoweringFailure(
                f"[kernel-harness] FAIL {family.name} lowers-for-tpu: the strategy drew a "
                f"configuration that does not lower for TPU: {result.error}\n"
                f"  case: {case!r}\n  case json: {case.to_json()}\n"
                f"  reproduce: {shlex.join(command)}"
            )

    prop.__name__ = f"{family.name}_lowers_for_tpu"
    prop.kh_example_fraction = 0.2
    return prop


def lower_strategy(family: Family, *, examples: int, seed: int = 0,
                   impl: Callable[..., Any] | None = None) -> list[LoweringResult]:
    """Lowers up to ``examples`` distinct configurations drawn from the family's strategy
    (failures are collected, not raised)."""
    results: dict[Any, LoweringResult] = {}

    @hypothesis.seed(seed)
    @hypothesis.settings(max_examples=examples, deadline=None, database=None,
                         phases=[hypothesis.Phase.generate],
                         suppress_health_check=list(hypothesis.HealthCheck))
    @given(case=family.cases())
    def collect(case: Any) -> None:
        key = case.static_key()
        if key not in results:
            results[key] = lower_case(family, case, impl)

    collect()
    return list(results.values())
