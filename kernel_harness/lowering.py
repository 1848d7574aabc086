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
import time
from collections.abc import Callable
from typing import Any

import hypothesis
import jax
from hypothesis import given

from kernel_harness import compat
from kernel_harness.backends import Backend
from kernel_harness.family import Family
from kernel_harness.metamorphic import PropertyNotApplicable

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

    def describe(self) -> str:
        summary = getattr(self.case, "shape_summary", None)
        what = summary() if callable(summary) else repr(self.case)
        if self.ok:
            return f"lowers ({self.custom_calls} Mosaic kernel(s), {self.seconds:.2f}s): {what}"
        return f"does NOT lower: {self.error}\n    case: {self.case.to_json()}"


class LoweringFailure(AssertionError):
    """A configuration drawn by the family's strategy does not lower for TPU."""


def _traceable(family: Family) -> Callable[..., Any]:
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
    traceable = _traceable(family)
    inputs = case.materialize()
    shapes = {k: jax.ShapeDtypeStruct(v.shape, v.dtype) for k, v in inputs.items()}
    start = time.perf_counter()
    try:
        fn = traceable(impl, case, TPU_LOWERING)
        text = compat.lower_for_platform(fn, (shapes,), "tpu")
    except Exception as e:  # noqa: BLE001 - the reason is the result
        message = str(e).strip().splitlines()
        reason = f"{type(e).__name__}: {message[0] if message else ''}"
        return LoweringResult(family=family.name, case=case, ok=False, error=reason[:600],
                              seconds=time.perf_counter() - start, custom_calls=0)
    return LoweringResult(family=family.name, case=case, ok=True, error=None,
                          seconds=time.perf_counter() - start,
                          custom_calls=text.count("tpu_custom_call"))


def lowers_for_tpu(family: Family, *, backend: Backend, impl: Callable[..., Any] | None = None,
                   impl_spec: str | None = None, observer: Any = None) -> Callable[[], None]:
    """The property "every configuration the strategy draws lowers for TPU" (the
    backend is irrelevant: nothing runs)."""
    _traceable(family)

    @given(case=family.cases())
    def prop(case: Any) -> None:
        result = lower_case(family, case, impl)
        hypothesis.event("lowers" if result.ok else "does not lower")
        if observer is not None and result.ok:
            observer.examples += 1
            observer.passed += 1
            observer.seconds += result.seconds
        if not result.ok:
            raise LoweringFailure(
                f"[kernel-harness] FAIL {family.name} lowers-for-tpu: the strategy drew a "
                f"configuration that does not lower for TPU: {result.error}\n"
                f"  case: {case!r}\n  case json: {case.to_json()}"
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


def add_cli(sub: Any) -> None:
    """Adds ``kernel-harness lower`` to the subparsers."""
    p = sub.add_parser("lower", help="lower drawn configurations for TPU on this machine")
    p.add_argument("family", nargs="*", help="families (default: all with a traceable hook)")
    p.add_argument("--examples", type=int, default=10, help="cases drawn per family")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--case", default=None, help="lower this one case (JSON; one family)")
    p.add_argument("--impl", default=None, help="MODULE:ATTR replacing the kernel")


def cmd_lower(args: Any) -> int:
    """Runs ``kernel-harness lower``: exit 0 only if every configuration lowered."""
    from kernel_harness import cli, report

    families = cli._families(args.family)
    impl = cli.load_impl(args.impl) if args.impl else None
    if (args.case or impl) and len(families) != 1:
        raise cli.UsageError("--case and --impl need exactly one family")
    if args.examples < 1:
        raise cli.UsageError("--examples must be at least 1")
    rows, failed, results = [], 0, []
    for fam in families:
        try:
            _traceable(fam)
        except PropertyNotApplicable as e:
            if args.family:
                raise cli.UsageError(str(e)) from None
            rows.append([fam.name, 0, 0, f"SKIP ({e})"])
            continue
        if args.case:
            try:
                found = [lower_case(fam, fam.case_type.from_json(args.case), impl)]
            except ValueError as e:
                raise cli.UsageError(f"--case: {e}") from None
        else:
            found = lower_strategy(fam, examples=args.examples, seed=args.seed, impl=impl)
        bad = [r for r in found if not r.ok]
        failed += len(bad)
        results += found
        rows.append([fam.name, len(found), len(found) - len(bad), "PASS" if not bad else "FAIL"])
    for r in results:
        print(f"  {r.family:<10} {r.describe()}")
    print()
    print(report.format_table(["family", "configurations", "lowered", "verdict"], rows))
    return 1 if failed or not results else 0
