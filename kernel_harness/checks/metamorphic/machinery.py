"""The machinery behind the metamorphic properties: axis-role bookkeeping,
visibility and influence of a perturbation, comparing two runs, and turning a
relation into a Hypothesis property (:func:`build`).

Equality with a reference misses bugs the reference shares. The properties compare the kernel
with itself: perturb inputs a query must not see, change block sizes, rerun, drop an option,
regroup heads, and check what must (not) change. A family opts in with hooks
(``Family.metamorphic``); a property whose hook is missing is not applicable
(:class:`~kernel_harness.core.errors.PropertyNotApplicable`), never a pass.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

import hypothesis
import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.errors import StopTest, UnsatisfiedAssumption

from kernel_harness.checks.metamorphic.arrays import differences, location
from kernel_harness.checks.metamorphic.replay import Recorder, Replayer
from kernel_harness.core.backends import Backend
from kernel_harness.core.errors import PropertyNotApplicable, UsageError
from kernel_harness.records.family import Arrays, Family
from kernel_harness.records.hooks import Metamorphic
from kernel_harness.records.kernels import declared_fallback
from kernel_harness.run import kernel_eager, kernel_outside
from kernel_harness.run.crash import Crash, KernelCrash
from kernel_harness.run.diagnostics import TpuInterpretCannotRun, note_cannot_run
from kernel_harness.run.kernel_count import KernelCount
from kernel_harness.run.kernel_eager import EAGER
from kernel_harness.run.kernel_poison import UNUSED, problem_text
from kernel_harness.run.report import case_repro_command
from kernel_harness.run.runner import ensure_supported, impl_name, run_counted


class MetamorphicFailure(AssertionError):
    """A metamorphic relation between kernel runs does not hold; the message says where.

    ``case`` is the failing example's case and ``draws_json`` what it drew besides (the
    ``--draws`` of its repro line; None when the example cannot be replayed), so a
    failure corpus can store it without parsing the message; ``impl`` how the report
    names the implementation."""

    def __init__(self, message: str, *, case: Any = None, draws_json: str | None = None,
                 impl: str = ""):
        super().__init__(message)
        self.case = case
        self.draws_json = draws_json
        self.impl = impl


# --- running ------------------------------------------------------------------------------------


@dataclasses.dataclass
class Check:
    """One example of one metamorphic property: runs the kernel, collects problems."""

    family: Family
    prop: str
    case: Any
    backend: Backend
    impl: Callable[..., Any]
    impl_spec: str | None
    inputs: Arrays
    problems: list[str] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    runs: int = 0
    #: What the example drew besides its case (set by the property; None when replayed).
    recorder: Recorder | Replayer | None = None

    @property
    def hooks(self) -> Metamorphic | None:
        return self.family.metamorphic

    def run(self, case: Any = None, inputs: Arrays | None = None,
            backend: Backend | None = None) -> Arrays:
        """The kernel's outputs on ``case`` (the example's by default) and ``inputs``, on
        ``backend`` (the example's, or one with a pinned schedule); an exception it raises
        becomes :class:`KernelCrash` (the example's crash report)."""
        self.runs += 1
        ran = self.case if case is None else case
        inputs = self.inputs if inputs is None else inputs
        backend = self.backend if backend is None else backend
        try:
            outputs, count = run_counted(self.family, self.impl, ran, inputs, backend)
        except (TpuInterpretCannotRun, UsageError):
            raise
        except Exception as e:  # noqa: BLE001 - a crash is a failure, reported as one
            raise KernelCrash(self.crash(e, ran, backend)) from e
        self._check_kernels_ran(count, ran)
        return {k: np.asarray(v) for k, v in outputs.items()}

    def _check_kernels_ran(self, count: KernelCount | None, ran: Any) -> None:
        """A relation between two runs of a plain-JAX fallback says nothing of the kernel:
        a run with fewer Pallas kernels than ``Family.kernels`` expects is a problem of
        the example (as in matches-reference), unless the implementation declares it; so is
        a run with an output no executed kernel wrote (``kernel result unused``), and one
        that computes outside its kernels what the family does not allow."""
        expected = self.family.kernels
        if count is None or expected is None or declared_fallback(self.impl) is not None:
            return
        if count.unused and not any(p.startswith(UNUSED) for p in self.problems):
            self.problems.append(f"{UNUSED}: run {self.runs}: "
                                 f"{problem_text(count.unused)}")
        changed = count.eager.changed if count.eager is not None else ()
        if changed and not any(p.startswith(EAGER) for p in self.problems):
            self.problems.append(f"{EAGER}: run {self.runs}: "
                                 f"{kernel_eager.problem_text(changed)}")
        skip = [{"fwd": "forward", "bwd": "backward"}[p] for p in count.short(expected)]
        bad = kernel_outside.disallowed(count.outside, self.family.outside_kernel, skip)
        # (elementwise arithmetic of a layout-only family: judged by matches-reference)
        bad = kernel_outside.split_strict(bad, strict=False)
        if bad and not any(p.startswith(kernel_outside.OUTSIDE) for p in self.problems):
            self.problems.append(f"{kernel_outside.OUTSIDE}: run {self.runs}: "
                                 f"{kernel_outside.problem_text(bad, self.family.outside_kernel)}")
        short = count.shortfall_text(expected)
        if short:
            where = "" if ran == self.case else " (a variant case)"
            problem = f"no Pallas kernel: run {self.runs}{where}: {short}"
            if not any(p.startswith("no Pallas kernel") for p in self.problems):
                self.problems.append(problem)

    def crash(self, error: BaseException, ran: Any, backend: Backend | None = None) -> Crash:
        """The crash report of ``error`` raised by run number :attr:`runs` on ``ran``
        (under ``backend``'s pinned schedule, if any): the example's case, and the
        ``--property``/``--draws`` that replay it."""
        rec = self.recorder
        draws = "[]" if rec is None else rec.to_json()
        schedule = () if backend is None else backend.schedule
        notes = [f"crashed on: kernel run {self.runs} of this example"
                 + ("" if ran == self.case else f", on the variant case {ran!r}")
                 + ("" if not schedule else ", under the pinned interpreter schedule "
                    + " ".join(f"{k}={v}" for k, v in schedule))]
        return Crash(
            family=self.family.name, case=self.case, backend=self.backend,
            impl=self.impl_spec or impl_name(self.impl), impl_spec=self.impl_spec,
            adjustments=(*self.family.adjustments, "--property", self.prop, "--draws", draws),
            error=error, prop=self.prop, notes=tuple(notes),
            not_replayable=None if rec is None else rec.replayable)

    def tolerance(self, output: str, factor: float = 1.0) -> float:
        return factor * self.family.tolerances.lookup(self.case.dtype, output).max_rel_err

    def valid(self, output: str, shape: tuple[int, ...], case: Any = None) -> np.ndarray:
        mask = self.family.valid(self.case if case is None else case).get(output)
        return np.ones(shape, bool) if mask is None else np.broadcast_to(mask, shape)

    def expect_same(self, a: Arrays, b: Arrays, *, may_change: Callable[[str, tuple], np.ndarray]
                    | None, factor: float, what: str, outputs: Sequence[str] | None = None
                    ) -> int:
        """Records a problem for every output that differs beyond ``factor`` x its
        tolerance where it must not; returns how many elements were checked."""
        checked = 0
        for name in outputs or self.family.output_axes:
            if name not in a or np.size(a[name]) == 0:
                continue
            shape = np.shape(a[name])
            where = self.valid(name, shape)
            if may_change is not None:
                where = where & ~may_change(name, shape)
            checked += int(where.sum())
            tol = self.tolerance(name, factor)
            count, rel, worst, _ = differences(a[name], b[name], where, tol)
            if count:
                axes = self.family.output_axes[name]
                self.problems.append(
                    f"{name}: {count} element(s) changed that must not ({what}); largest change "
                    f"{rel:.3g} x scale (tolerance {self.tolerance(name, factor):.3g}) at "
                    f"{location(axes, worst)}: {float(a[name][worst]):.6g} -> "
                    f"{float(b[name][worst]):.6g}"
                )
        return checked

    def fail_if_problems(self) -> None:
        if not self.problems:
            return
        shape = getattr(self.case, "shape_summary", None)
        where = " ".join(filter(None, [self.case.dtype, shape() if callable(shape) else ""]))
        impl = str(self.impl_spec or getattr(self.impl, "__qualname__", self.impl))
        lines = [
            f"[kernel-harness] FAIL {self.family.name} {self.prop} {where} "
            f"backend={self.backend.name}: {self.problems[0]}",
            *(f"  {p}" for p in self.problems[1:]),
            *(f"  note: {n}" for n in self.notes),
            f"  impl: {impl}",
            f"  case: {self.case!r}",
            f"  case json: {self.case.to_json()}",
            self.reproduce_line(),
        ]
        rec = self.recorder
        draws = None if rec is not None and rec.replayable is not None else (
            "[]" if rec is None else rec.to_json())
        raise MetamorphicFailure("\n".join(lines), case=self.case, draws_json=draws, impl=impl)

    def reproduce_line(self) -> str:
        """``  reproduce: kernel-harness repro FAMILY ... --property P --draws JSON``: this
        example exactly (its case and every value it drew), or why it cannot be."""
        rec = self.recorder
        if rec is not None and rec.replayable is not None:
            return f"  reproduce: not replayable ({rec.replayable})"
        draws = "[]" if rec is None else rec.to_json()
        command = case_repro_command(
            self.family.name, self.backend.name, self.case, self.impl_spec,
            (*self.family.adjustments, "--property", self.prop, "--draws", draws))
        return f"  reproduce: {command}"


Body = Callable[[Check, st.DataObject], None]


@dataclasses.dataclass(frozen=True)
class Spec:
    """A metamorphic property: its body, the hook it needs, and its example fraction."""

    name: str
    body: Body
    #: The hook it needs: a :class:`Metamorphic` field's name, None (the hooks
    #: themselves) or :data:`ANY_FAMILY`.
    needs: str | None
    fraction: float
    doc: str
    #: Which drawn cases the property can use (``applies(hooks, case, draw)``; ``draw``
    #: draws what the property's body would draw before deciding, as an op relation's
    #: variant does), and how to say it (``"has segment ids"``); None: every case.
    applies: Callable[[Metamorphic | None, Any, Callable[..., Any]], bool] | None = None
    applies_what: str = ""


#: Fewest examples a capped metamorphic property runs.
MIN_EXAMPLES = 2


def example_cap(prop: Callable[..., Any], max_examples: int) -> int:
    """A property's example count under a profile's ``max_examples``: scaled down by
    its ``kh_example_fraction`` (1.0 for properties without one), at least
    :data:`MIN_EXAMPLES`."""
    fraction = getattr(prop, "kh_example_fraction", 1.0)
    if fraction >= 1.0:
        return max_examples
    return max(MIN_EXAMPLES, min(max_examples, round(max_examples * fraction)))


#: ``Spec.needs`` of a property any family can run (no hooks needed).
ANY_FAMILY = "any family"
#: ``Spec.needs`` of a property that varies the TPU interpreter's schedule: any family, on
#: the ``tpu-interpret`` backend only.
TPU_INTERPRETER = "the TPU interpreter"


def applicable(family: Family, spec: Spec) -> Metamorphic | None:
    """The family's hooks, or PropertyNotApplicable when ``spec`` needs one it lacks
    (``needs``: :data:`ANY_FAMILY`, None for the hooks themselves, or a hook's name)."""
    hooks = family.metamorphic
    if spec.needs in (ANY_FAMILY, TPU_INTERPRETER):
        return hooks
    if hooks is None:
        raise PropertyNotApplicable(
            f"{family.name} declares no metamorphic hooks (Family.metamorphic is None)"
        )
    if spec.needs is not None and getattr(hooks, spec.needs) is None:
        raise PropertyNotApplicable(f"{family.name} has no {spec.needs!r} hook for {spec.name}")
    return hooks


#: Cases drawn to see whether a narrowed family still reaches what a property needs.
REACH_TRIES = 30


class _Reached(Exception):
    pass


def check_reachable(family: Family, spec: Spec, hooks: Metamorphic | None) -> None:
    """PropertyNotApplicable (a SKIP with the reason) where the family is narrowed
    (``--without``) and none of :data:`REACH_TRIES` drawn cases is one ``spec`` can use
    (segment isolation without segments, an op relation with no variant for any case
    left): every example would be rejected, and Hypothesis would end the run with a
    health check instead of a verdict."""
    if not family.without or spec.applies is None:
        return

    @hypothesis.settings(max_examples=REACH_TRIES, derandomize=True, database=None,
                         deadline=None, phases=[hypothesis.Phase.generate],
                         suppress_health_check=list(hypothesis.HealthCheck))
    @given(case=family.cases(), data=st.data())
    def probe(case: Any, data: st.DataObject) -> None:
        if spec.applies(hooks, case, data.draw):
            raise _Reached

    try:
        probe()
    except _Reached:
        return
    raise PropertyNotApplicable(
        f"none of {REACH_TRIES} cases drawn without {', '.join(sorted(family.without))} "
        f"{spec.applies_what}: {spec.name} has nothing to check")


def build(spec: Spec) -> Callable[..., Callable[[], None]]:
    """The property builder for ``spec`` (same signature as ``matches_reference``)."""

    def builder(family: Family, *, backend: Backend, impl: Callable[..., Any] | None = None,
                impl_spec: str | None = None, observer: Any = None) -> Callable[[], None]:
        ensure_supported(family, backend)
        check_reachable(family, spec, applicable(family, spec))
        if spec.needs == TPU_INTERPRETER and backend.name != "tpu-interpret":
            raise PropertyNotApplicable(
                f"{spec.name} varies the TPU interpreter's schedule: it runs on "
                f"--backend tpu-interpret only (this run: {backend.name})")
        kernel = family.kernel if impl is None else impl

        @given(case=family.cases(), data=st.data())
        def prop(case: Any, data: st.DataObject) -> None:
            start = time.perf_counter()
            check = Check(family=family, prop=spec.name, case=case, backend=backend,
                          impl=kernel, impl_spec=impl_spec, inputs=case.materialize(),
                          recorder=Recorder(data))
            ok = rejected = False
            crash: Crash | None = None
            try:
                spec.body(check, check.recorder)
                check.fail_if_problems()
                ok = True
            except KernelCrash as e:
                crash = e.crash
                raise
            except TpuInterpretCannotRun as e:
                rejected = True
                note_cannot_run(e, observer)  # counts it as rejected
            except (UnsatisfiedAssumption, StopTest):
                # assume()/reject() in the relation, or a draw past Hypothesis's data
                # limit: Hypothesis discards the example; it neither passed nor failed.
                rejected = True
                if observer is not None:
                    observer.rejected += 1
                raise
            finally:
                # Events and counts describe examples that ran (failing ones included),
                # never a rejected one.
                if not rejected:
                    for label in family.events(case):
                        hypothesis.event(label)
                        if observer is not None:
                            observer.events[label] += 1
                if observer is not None and crash is not None:
                    observer.record_crash(crash)  # counts the example, grouped by kind
                elif observer is not None and not rejected:
                    observer.record_check(case, time.perf_counter() - start)
                    observer.end_example(ok)

        prop.__name__ = f"{family.name}_{spec.name.replace('-', '_')}"
        prop.__doc__ = spec.doc
        prop.kh_example_fraction = spec.fraction
        prop.kh_draws_in_test = True  # data.draw in the body: see checks.shrinking
        return prop

    builder.__name__ = spec.name.replace("-", "_")
    builder.__doc__ = spec.doc
    return builder
