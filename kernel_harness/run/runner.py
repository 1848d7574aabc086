"""Runs one case of one family on one backend against its reference."""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from kernel_harness.core.backends import Backend, BackendUnavailable, running_on
from kernel_harness.core.case import Arrays
from kernel_harness.core.compat import mesh as compat_mesh
from kernel_harness.core.devices import require_devices
from kernel_harness.core.judges import judge_output
from kernel_harness.core.tolerance import Verdict
from kernel_harness.records.family import Family
from kernel_harness.records.kernels import KernelExpectation, declared_fallback
from kernel_harness.records.outputs import judged_outputs
from kernel_harness.records.outside import OutsideKernel
from kernel_harness.run import impl_source, kernel_count, kernel_eager, kernel_outside, memory_maps
from kernel_harness.run import rerun as rerun_module
from kernel_harness.run.count_errors import ClosedOverTracer


@dataclasses.dataclass(frozen=True, kw_only=True)
class CaseResult:
    """The outcome of one case: a verdict per output, and what ran."""

    family: str
    case: Any
    backend: Backend
    impl: str
    impl_spec: str | None
    verdicts: tuple[Verdict, ...]
    excluded: dict[str, int]
    seconds: float
    adjustments: tuple[str, ...] = ()
    #: Outputs not compared for this case, with why (``Family.not_compared``).
    not_compared: dict[str, str] = dataclasses.field(default_factory=dict)
    #: The Pallas kernels the example ran (None: the family expects none, nothing counted).
    kernels: kernel_count.KernelCount | None = None
    #: What the family expects a real implementation to run (``Family.kernels``).
    expected_kernels: KernelExpectation | None = None
    #: The fallback the implementation declares, with its reason, or None.
    fallback_declared: str | None = None
    #: What the family allows outside its kernels (``Family.outside_kernel``).
    outside_kernel: OutsideKernel | None = None
    #: Outputs a second run of the same program on the same inputs did not reproduce bit
    #: for bit (:mod:`kernel_harness.run.rerun`; empty: not rerun, or reproduced).
    rerun_changed: tuple[str, ...] = ()
    #: Lines of the implementation's source that can tell a check from a user's run
    #: (:mod:`kernel_harness.run.impl_source`), less those the user's config accepts.
    suspicious_source: tuple[impl_source.Finding, ...] = ()
    #: The findings the user's config accepts, each as a note naming the file and reason.
    accepted_source: tuple[str, ...] = ()

    @property
    def fell_back(self) -> tuple[str, ...]:
        """The passes (``fwd``, ``bwd``) that ran fewer Pallas kernels than expected."""
        if self.kernels is None or self.expected_kernels is None:
            return ()
        return self.kernels.short(self.expected_kernels)

    @property
    def kernel_problem(self) -> str:
        """Why this example fails on its kernel count ("" if it does not: enough kernels,
        or a declared fallback)."""
        if not self.fell_back or self.fallback_declared is not None:
            return ""
        assert self.kernels is not None and self.expected_kernels is not None
        return self.kernels.shortfall_text(self.expected_kernels)

    @property
    def unused_results(self) -> tuple[str, ...]:
        """The outputs that depend on no executed Pallas kernel (``output `result```,
        ``gradient of `x```: :mod:`kernel_harness.run.kernel_poison`), a failure like a
        fallback's; never excused by a declared fallback (the kernels that ran are judged)."""
        return () if self.kernels is None else self.kernels.unused

    @property
    def eager_changed(self) -> tuple[str, ...]:
        """The outputs a direct (eager) call returned otherwise than the traced program
        (:mod:`kernel_harness.run.kernel_eager`): a failure, never excused."""
        eager = None if self.kernels is None else self.kernels.eager
        return () if eager is None else eager.changed

    def _outside(self, strict: bool) -> dict[str, tuple[str, ...]]:
        if self.kernels is None or self.outside_kernel is None:
            return {}
        skip = [{"fwd": "forward", "bwd": "backward"}[p] for p in self.fell_back]
        bad = kernel_outside.disallowed(self.kernels.outside, self.outside_kernel, skip)
        return kernel_outside.split_strict(bad, strict=strict)

    @property
    def outside_math(self) -> dict[str, tuple[str, ...]]:
        """Per pass (``forward``, ``backward``), the measured primitives the example ran
        outside every Pallas kernel that the family does not allow
        (:mod:`kernel_harness.run.kernel_outside`): a failure like a fallback's. A pass
        below the kernel expectation is left out (named as such, or a declared fallback)."""
        return self._outside(strict=False)

    @property
    def outside_elementwise(self) -> dict[str, tuple[str, ...]]:
        """For a family whose wrapper is layout only (``OutsideKernel.layout_only``), per
        pass, the elementwise arithmetic, comparisons and gathers the example ran outside
        its kernels on arrays of the problem's size: named after every other class."""
        return self._outside(strict=True)

    @property
    def passed(self) -> bool:
        return (all(v.passed for v in self.verdicts) and not self.kernel_problem
                and not self.unused_results and not self.outside_math
                and not self.rerun_changed and not self.suspicious_source
                and not self.eager_changed and not self.outside_elementwise)

    @property
    def failures(self) -> tuple[Verdict, ...]:
        return tuple(v for v in self.verdicts if not v.passed)


def ensure_supported(family: Family, backend: Backend, *, devices: bool = True) -> None:
    """Raises :class:`BackendUnavailable` if ``family`` cannot run on ``backend``, or
    (``devices``) this process has fewer devices than its cases use
    (:class:`~kernel_harness.core.devices.DevicesUnavailable`)."""
    if backend.name not in family.backends:
        # No backend here: what to install (Family.requires) says more than the summary.
        here = (f"none here (needs {family.requires})" if family.requires
                else f"none here: {family.summary}")
        raise BackendUnavailable(
            f"family {family.name!r} cannot run on backend {backend.name!r}; "
            f"it supports: {', '.join(sorted(family.backends)) or here}"
        )
    if devices and family.devices > 1:
        require_devices(backend.platform, family.devices,
                        f"family {family.name!r} (cases on up to {family.devices} devices)")


def run_on_backend(
    family: Family, impl: Callable[..., Any], case: Any, inputs: Arrays, backend: Backend
) -> Arrays:
    """Calls the family's adapter (after :func:`ensure_supported`); under
    ``tpu-interpret`` records every interpreted kernel and fails on unwaived races
    (:class:`~kernel_harness.core.errors.KernelRaceDetected`) or uninitialized reads
    (see :mod:`kernel_harness.run.diagnostics`), resetting the simulator state before
    and after, also after a failure. Drops jax's compiled programs first when the process
    nears its limit on memory mappings (:mod:`kernel_harness.run.memory_maps`)."""
    return run_counted(family, impl, case, inputs, backend)[0]


def run_counted(
    family: Family, impl: Callable[..., Any], case: Any, inputs: Arrays, backend: Backend
) -> tuple[Arrays, kernel_count.KernelCount | None]:
    """:func:`run_on_backend`, and the Pallas kernels the run launched
    (:mod:`kernel_harness.run.kernel_count`; None where ``Family.kernels`` expects none)."""
    ensure_supported(family, backend)  # the one backend guard: adapters do not repeat it
    memory_maps.relieve()
    try:
        if family.kernels is None:
            return _run(family, impl, case, inputs, backend), None
        counted = kernel_count.counting(impl, family.kernels)
        with kernel_count.collecting(counted, family.name, case, backend.name,
                                     rerun=_probe_run(family, case, inputs, backend)) as sink:
            outputs = _run(family, counted, case, inputs, backend)
        return outputs, sink.count
    except Exception as e:
        # A kernel that failed inside an effectful callback (the TPU interpreter's) leaves
        # its error in jax's runtime tokens, where it fails every later example: drained
        # here, so it is this example's failure only.
        compat_mesh.drain_failed_effects()
        leak = ClosedOverTracer.explain(e)
        if leak is not None:
            raise leak from e
        raise


def _probe_run(family: Family, case: Any, inputs: Arrays, backend: Backend
               ) -> Callable[[Callable[..., Any]], Arrays]:
    """The adapter's run of ``case`` on a poisoning probe
    (:class:`~kernel_harness.run.kernel_poison.Probe`), failed effects drained as after a
    real run's failure."""
    def rerun(probe: Callable[..., Any]) -> Arrays:
        try:
            with running_on(backend):
                return family.run(probe, case, inputs, backend)
        except Exception:
            compat_mesh.drain_failed_effects()
            raise

    return rerun


def _run(family: Family, impl: Callable[..., Any], case: Any, inputs: Arrays,
         backend: Backend) -> Arrays:
    """The adapter's run, the implementation's ``current_backend()`` being ``backend``."""
    with running_on(backend):
        if backend.name != "tpu-interpret":
            return family.run(impl, case, inputs, backend)
        from kernel_harness.run import diagnostics

        outputs, _ = diagnostics.diagnosed_run(
            family.name, lambda: family.run(impl, case, inputs, backend)
        )
        return outputs


def impl_name(impl: Callable[..., Any], spec: str | None = None) -> str:
    """How reports name an implementation: ``spec``, the ``MODULE:ATTR`` the user gave,
    when there is one (a factory's product is ``mykern.bugs:rope``, not
    ``mykern.bugs:_variant.<locals>.rope``); else ``module:qualname``, and a partial as
    ``functools.partial(module:qualname, its arguments)`` (the function alone would name
    the pristine kernel a planted bug wraps)."""
    if spec:
        return spec
    if isinstance(impl, functools.partial):
        def short(value: Any) -> str:
            text = repr(value)
            return text if len(text) <= 40 else text[:37] + "..."

        bound = [short(a) for a in impl.args] + [f"{k}={short(v)}"
                                                 for k, v in impl.keywords.items()]
        return f"functools.partial({', '.join([impl_name(impl.func), *bound])})"
    module = getattr(impl, "__module__", "?")
    name = getattr(impl, "__qualname__", None) or type(impl).__name__
    return f"{module}:{name}"


def nonfinite_reference(family: Family, case: Any, reference: Arrays) -> str:
    """Names the outputs whose reference is non-finite inside the contract where the
    contract does not allow it (``""`` if none), e.g. ``out: 3 at batch=0 head=1 ...``."""
    found = []
    for out in judged_outputs(family, case, same_as=False, compared_only=False):
        if out.nonfinite_reference_ok or out.name not in reference:
            continue
        ref = np.asarray(reference[out.name])
        bad = ~np.isfinite(ref)
        if out.valid is not None:
            bad &= np.broadcast_to(out.valid, ref.shape)
        if bad.any():
            first = " ".join(f"{a}={int(i)}" for a, i in zip(out.axes, np.argwhere(bad)[0],
                                                              strict=True))
            found.append(f"{out.name}: {int(bad.sum())} at {first}")
    return "; ".join(found)


#: A reference may return ``<output>:magnitude`` beside an output that is a cancelling
#: sum: the size of the summed terms, used as that output's scale where it is larger
#: (:func:`kernel_harness.core.compare.compare`).
MAGNITUDE_SUFFIX = ":magnitude"


def low_precision_outputs(
    family: Family, case: Any, inputs: Arrays, backend: Backend
) -> Arrays | None:
    """The family's low-precision computation of ``case`` on ``backend`` (the yardstick of
    the calibrated judge), or None where no output of the case's dtype is judged that way."""
    if case.dtype not in family.calibrated_dtypes():
        return None
    assert family.low_precision_reference is not None  # Family.__post_init__ checks it
    return {k: np.asarray(v) for k, v in
            family.low_precision_reference(case, inputs, backend).items()}


def judge_outputs(
    family: Family, case: Any, actual: Arrays, expected: Arrays, *, same_as: bool = True,
    low_precision: Arrays | None = None,
) -> tuple[tuple[Verdict, ...], dict[str, int]]:
    """Compares and judges every output the family declares, globally and per slice
    (see :func:`~kernel_harness.core.compare.compare`), and the adapter's extra outputs
    of ``Family.same_as``. ``same_as=False`` is for programs that compute the declared
    outputs only (a family's ``traceable`` hook, as sharding runs it): matches-reference
    judges the extras through the adapter.

    Outputs whose tolerance declares the calibrated judge are judged against
    ``low_precision`` (:func:`low_precision_outputs`); leaving it out for such a case is
    an error, never a quiet switch to the fixed table."""
    if low_precision is None and case.dtype in family.calibrated_dtypes():
        raise ValueError(f"{family.name}: {case.dtype} outputs are judged by the calibrated "
                         "bound; pass low_precision=low_precision_outputs(...)")
    extras = family.same_as if same_as else {}
    missing = [name for name in (*family.output_axes, *extras) if name not in actual]
    if missing:
        raise ValueError(f"{family.name}: the kernel adapter returned no {missing}")
    verdicts, excluded = [], {}
    for out in judged_outputs(family, case, same_as=same_as):
        n_out = out.excluded(np.shape(actual[out.name]))
        if n_out:
            excluded[out.name] = n_out
        verdicts.append(judge_output(
            out, actual[out.name], expected[out.reference],
            magnitude=expected.get(f"{out.reference}{MAGNITUDE_SUFFIX}"),
            lowp=None if low_precision is None else low_precision.get(out.reference)))
    return tuple(verdicts), excluded


def check_case(
    family: Family,
    case: Any,
    backend: Backend,
    impl: Callable[..., Any] | None = None,
    *,
    impl_spec: str | None = None,
    rerun: bool = False,
) -> CaseResult:
    """Runs ``impl`` (default: the family's kernel) and the reference on ``case``.

    ``impl_spec`` is the ``MODULE:ATTR`` the implementation was loaded from,
    for the repro command. Exceptions raised by the kernel propagate: a crash
    is a failure too. Under ``tpu-interpret`` a detected race is a failure. An example
    that ran fewer Pallas kernels than ``Family.kernels`` expects fails too, unless
    ``impl`` declares a fallback (:func:`kernel_harness.records.kernels.fallback`).
    ``rerun``: the same program runs a second time on the same inputs and must reproduce
    every output bit for bit (:mod:`kernel_harness.run.rerun`), unless the family declares
    its kernel nondeterministic; and a configuration traced for the first time may be
    called eagerly too (:mod:`kernel_harness.run.kernel_eager`).
    """
    ensure_supported(family, backend)
    impl = family.kernel if impl is None else impl
    start = time.perf_counter()
    inputs = case.materialize()
    config = impl_source.config_snapshot()
    with kernel_eager.wanted(rerun):  # its first run of a program: called eagerly too
        actual, kernels = run_counted(family, impl, case, inputs, backend)
    changed: tuple[str, ...] = ()
    if rerun and not family.nondeterministic:
        # The counting wrapper is one object per implementation: the adapter's cached
        # program runs again, nothing is traced or compiled.
        same = impl if family.kernels is None else kernel_count.counting(impl, family.kernels)
        again = _run(family, same, case, inputs, backend)
        changed = rerun_module.changes(actual, again, (*family.output_axes,
                                                       *family.same_as))
    kernels = kernel_eager.judged(kernels)  # after the rerun: its runs come between none
    expected = family.reference(case, inputs)
    found = impl_source.findings(impl) + impl_source.config_changes(config)
    verdicts, excluded = judge_outputs(
        family, case, actual, expected,
        low_precision=low_precision_outputs(family, case, inputs, backend))
    return CaseResult(
        family=family.name,
        case=case,
        backend=backend,
        impl=impl_name(impl, impl_spec),
        impl_spec=impl_spec,
        verdicts=verdicts,
        excluded=excluded,
        seconds=time.perf_counter() - start,
        adjustments=family.adjustments,
        not_compared=dict(family.not_compared(case)),
        kernels=kernels,
        expected_kernels=family.kernels,
        fallback_declared=declared_fallback(impl),
        outside_kernel=family.outside_kernel,
        rerun_changed=changed,
        suspicious_source=impl_source.unaccepted(found),
        accepted_source=tuple(impl_source.accepted_notes(found)),
    )
