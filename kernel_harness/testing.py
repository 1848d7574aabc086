"""The harness in a user's own tests: :func:`check` for a test function, and the pytest
collection behind ``pytest --kh-check FAMILY`` and the ``kh_unit`` fixture.

Every way in runs a :class:`~kernel_harness.orchestration.session.CheckSession`, so a failure
reads the same as under ``kernel-harness check``: the harness's report (summary line
first, the per-output detail, a repro command that replays exactly that example), never
Hypothesis's internals::

    import kernel_harness.testing

    def test_my_kernel():
        kernel_harness.testing.check("hstu", impl="mykernels.hstu:attention", profile="ci")
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from kernel_harness.core.backends import BackendUnavailable, resolve_backend
from kernel_harness.core.errors import UsageError
from kernel_harness.orchestration import options, session_header
from kernel_harness.orchestration.session import CheckSession, SessionResult
from kernel_harness.orchestration.units import FAILED_VERDICTS, UnitResult
from kernel_harness.records.config import load_config
from kernel_harness.records.family import Family
from kernel_harness.records.registry import family_names, get_family, load_family_modules
from kernel_harness.run.profiles import ShrinkBudget, pytest_profile
from kernel_harness.run.runner import ensure_supported


class HarnessCheckFailed(AssertionError):
    """A harness check that did not pass; the message is the harness's report."""


def check(
    family: str | Family | Sequence[str | Family],
    *,
    impl: str | Callable[..., Any] | None = None,
    profile: str | None = None,
    properties: Sequence[str] | None = None,
    backend: str | None = None,
    max_examples: int | None = None,
    seed: int | None = None,
    draws_per_compile: int | None = None,
    without: Sequence[str] = (),
    tolerance: Sequence[str] = (),
    tolerance_scale: float | None = None,
    timeout: float | None = None,
    isolate: bool = False,
    fail_fast: bool = False,
    shrink_budget: str | ShrinkBudget | None = None,
    corpus: str | None = None,
    resume: str | None = None,
    accept_declared: bool = False,
) -> SessionResult:
    """Checks ``family`` (a name, a :class:`Family`, or several) with every property, or
    ``properties``; raises :class:`HarnessCheckFailed` (an AssertionError) carrying the
    harness's report when any unit did not pass, or when nothing was compared at all.
    ``shrink_budget``: ``SECONDS/STEPS`` (or a :class:`ShrinkBudget`; ``"0"``: no shrinking),
    default the profile's. ``profile``, ``backend`` and ``corpus`` left unset come from the
    project's ``[tool.kernel-harness]`` (read from the working directory up), else ``dev``,
    ``interpret`` and none: the rule of every front end
    (:mod:`kernel_harness.orchestration.options`). ``resume``: the ``--json`` document of an
    interrupted run, whose finished units are kept (only the others run).
    ``accept_declared``: accept what ``impl`` declares about itself: leave out what it
    declares it lacks and pass its declared fallback (else only ``without`` narrows the
    check). The project's ``without`` table narrows it too (``without`` adds
    to it), and its ``waivers`` apply beside the package's. A bad argument is a
    :class:`~kernel_harness.core.errors.UsageError`."""
    families = [family] if isinstance(family, str | Family) else list(family)
    if isinstance(shrink_budget, str):
        try:
            shrink_budget = ShrinkBudget.parse(shrink_budget)
        except ValueError as e:
            raise UsageError(str(e)) from None
    config = load_config()
    resolved = options.settings(config,
                                {"profile": profile, "backend": backend, "corpus": corpus},
                                {"profile": "dev", "backend": "interpret", "corpus": None},
                                flags={"profile": "profile=", "backend": "backend=",
                                       "corpus": "corpus="})
    request = options.check_request(
        resolved, config, families=tuple(families), properties=tuple(properties or ()),
        impl=impl,
        max_examples=max_examples, seed=seed, draws_per_compile=draws_per_compile,
        without=tuple(without), tolerance=tuple(tolerance), tolerance_scale=tolerance_scale,
        timeout=timeout, isolate=isolate, fail_fast=fail_fast, shrink_budget=shrink_budget,
        resume=resume, accept_declared=accept_declared,
    )
    result = CheckSession(request).run()
    if not result.ok:
        failed = [r for r in result.results if r.verdict in FAILED_VERDICTS]
        text = "\n\n".join(f"=== {r.family} / {r.prop}: {r.label or r.verdict} ===\n{r.text}"
                           for r in failed)
        raise HarnessCheckFailed(f"{result.final_line()}\n{text}" if text
                                 else f"{result.final_line()} (no property ran)")
    return result


# --- pytest collection -------------------------------------------------------------------

_PLAN_KEY = pytest.StashKey["_Plan"]()


def _split(values: Sequence[str]) -> list[str]:
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


def _scoped(values: Sequence[str], option: str) -> tuple[list[str], dict[str, list[str]]]:
    """``--kh-impl X`` / ``--kh-impl FAMILY=X`` as (unscoped values, per-family values)."""
    plain: list[str] = []
    scoped: dict[str, list[str]] = {}
    for item in values:
        family, sep, value = item.partition("=")
        if sep and ":" not in family and "," not in family:
            if not value:
                raise pytest.UsageError(f"{option} {item!r}: nothing after '='")
            scoped.setdefault(family, []).append(value)
        else:
            plain.append(item)
    return plain, scoped


class _Plan:
    """This pytest run's harness sessions (one per family, since ``--kh-impl`` may differ
    per family), built from the ``--kh-*`` options on first use."""

    def __init__(self, config: pytest.Config, names: Sequence[str]) -> None:
        opt = config.getoption
        try:
            # The project's [tool.kernel-harness]: an explicit --kh-* option beats it.
            cfg = load_config(Path(config.invocation_params.dir))
            if cfg.family_modules:
                load_family_modules(cfg.family_modules, search_path=cfg.root,
                                    origin=cfg.where("family-modules"))
            load_family_modules(opt("--kh-family-module"))
            chosen = _split(names)
            everything = chosen == ["all"]
            if everything:
                chosen = family_names()
            given_profile = opt("--kh-profile")
            resolved = options.settings(cfg, {
                "profile": pytest_profile(given_profile, None) if given_profile else None,
                "backend": opt("--kh-backend"), "corpus": opt("--kh-corpus"),
            }, {"profile": pytest_profile(None, opt("--hypothesis-profile", default=None)),
                "backend": "interpret", "corpus": None},
                flags={k: f"--kh-{k}" for k in ("profile", "backend", "corpus")})
            backend = resolved["backend"].value
            budget = opt("--kh-shrink-budget")
            try:
                shrink_budget = None if budget is None else ShrinkBudget.parse(budget)
            except ValueError as e:
                raise UsageError(f"--kh-shrink-budget: {e}") from None
            impls, impl_by_family = _scoped(opt("--kh-impl"), "--kh-impl")
            without, without_by_family = _scoped(opt("--kh-without"), "--kh-without")
            if impls and len(chosen) != 1:
                raise UsageError("--kh-impl MODULE:ATTR replaces one family's kernel: check "
                                 "exactly one family, or write --kh-impl FAMILY=MODULE:ATTR")
            self.sessions: dict[str, CheckSession] = {}
            #: Families of "every family" the backend cannot run: a skip with the reason
            #: (a family named explicitly that cannot run is a usage error, as in check).
            self.unrunnable: dict[str, str] = {}
            for name in chosen:
                if everything:
                    try:
                        ensure_supported(get_family(name), resolve_backend(backend))
                    except BackendUnavailable as e:
                        self.unrunnable[name] = str(e)
                        continue
                impl = impl_by_family.get(name, impls)
                request = options.check_request(
                    resolved, cfg, families=(name,), properties=tuple(opt("--kh-property")),
                    impl=impl[-1] if impl else None, max_examples=opt("--kh-max-examples"),
                    seed=opt("--kh-seed"), draws_per_compile=opt("--kh-draws-per-compile"),
                    without=tuple([*without, *without_by_family.get(name, [])]),
                    tolerance=tuple(opt("--kh-tolerance")),
                    tolerance_scale=opt("--kh-tolerance-scale"), timeout=opt("--kh-timeout"),
                    isolate=opt("--kh-isolate"), fail_fast=opt("--kh-fail-fast"),
                    shrink_budget=shrink_budget,
                    kernel_coverage=opt("--kh-kernel-coverage"), resume=opt("--kh-resume"),
                    accept_declared=opt("--kh-accept-declared"),
                )
                self.sessions[name] = CheckSession(request)
        except (UsageError, ValueError) as e:
            raise pytest.UsageError(str(e)) from None
        self.failed_first: dict[str, str] = {}
        self._supervisors: dict[str, Any] = {}
        self.coverage: Any = None
        self._recording: Any = None
        self._closed = False
        if opt("--kh-kernel-coverage") and self.sessions:
            from kernel_harness.run import kernel_coverage

            self.coverage = kernel_coverage.KernelCoverage()

    def run(self, session: CheckSession, unit: Any) -> UnitResult:
        """The unit's result (in a worker process when the session is isolated)."""
        family = unit.family.name
        first = self.failed_first.get(family)
        if session.request.fail_fast and first is not None:
            return session.not_run(unit, f"--kh-fail-fast: {first} failed")
        if session.isolated:
            supervisor = self._supervisors.get(family)
            if supervisor is None:
                supervisor = self._supervisors[family] = session.supervisor()
            result = supervisor.run_unit(unit)
        else:
            if self.coverage is not None and self._recording is None:
                from kernel_harness.run import kernel_coverage

                self._recording = kernel_coverage.recording()
                self.coverage = self._recording.__enter__()
            result = session.run_unit(unit)
        if result.verdict in FAILED_VERDICTS:
            self.failed_first.setdefault(family, unit.prop)
        return result

    def close(self) -> None:
        """Ends any worker process (adding its kernel-branch coverage) and the recording."""
        if self._closed:
            return
        self._closed = True
        for supervisor in self._supervisors.values():
            supervisor.close()
            if self.coverage is not None:
                for data in supervisor.coverage:
                    self.coverage.absorb(data)
        if self._recording is not None:
            self._recording.__exit__(None, None, None)


def _plan(config: pytest.Config, names: Sequence[str]) -> _Plan:
    plan = config.stash.get(_PLAN_KEY, None)
    if plan is None:
        plan = config.stash[_PLAN_KEY] = _Plan(config, names)
    return plan


class _UnitFailed(Exception):
    """Carries a unit's report to :meth:`HarnessUnit.repr_failure`."""


def _settle(result: UnitResult, fail: Callable[[str], Any]) -> UnitResult:
    """A unit's result as a pytest outcome: SKIP and NOT RUN skip with the reason, any
    verdict but PASS calls ``fail`` with the harness's report."""
    if result.verdict in ("SKIP", "NOT RUN"):
        pytest.skip(result.line.strip())
    if result.verdict != "PASS":
        fail(result.text or result.line)
    return result


def _raise_unit_failed(report: str) -> None:
    raise _UnitFailed(report)


class HarnessUnit(pytest.Item):
    """One family x property of a harness session, as a pytest test."""

    def __init__(self, *, check_session: CheckSession, unit: Any, plan: _Plan, **kwargs: Any):
        super().__init__(**kwargs)
        self.check_session, self.unit, self.plan = check_session, unit, plan

    def runtest(self) -> None:
        """Runs the unit; SKIP and NOT RUN are pytest skips with the reason."""
        _settle(self.plan.run(self.check_session, self.unit), _raise_unit_failed)

    def repr_failure(self, excinfo: Any, style: Any = None) -> Any:
        """The harness's report, not a traceback through the harness and Hypothesis."""
        if isinstance(excinfo.value, _UnitFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        """Where pytest says the test lives: the family and property."""
        return self.path, None, f"kernel-harness {self.name}"


class _KeptUnit(HarnessUnit):
    """A unit ``--kh-resume`` kept from the interrupted run: its recorded verdict again."""

    def __init__(self, *, kept: UnitResult, **kwargs: Any):
        pytest.Item.__init__(self, **kwargs)
        self.kept = kept

    def runtest(self) -> None:
        """The recorded verdict (a FAIL fails again, with the recorded line)."""
        _settle(self.kept, _raise_unit_failed)


class _UnrunnableFamily(pytest.Item):
    """A family the backend cannot run, shown as a skip with the reason (never silent)."""

    def __init__(self, *, why: str, **kwargs: Any):
        super().__init__(**kwargs)
        self.why = why

    def runtest(self) -> None:
        """Skips with the reason."""
        pytest.skip(self.why)


def collect(session: pytest.Session, config: pytest.Config) -> list[pytest.Item]:
    """The tests of ``--kh-check``: one per family and property (``hstu::matches-reference``)."""
    plan = _plan(config, config.getoption("--kh-check"))
    items: list[pytest.Item] = []
    for check_session in plan.sessions.values():
        for unit in check_session.units:
            items.append(HarnessUnit.from_parent(
                session, name=unit.name, nodeid=f"kernel-harness::{unit.name}",
                check_session=check_session, unit=unit, plan=plan))
        for kept in check_session.resumed.kept:
            name = f"{kept.family}::{kept.prop}"
            items.append(_KeptUnit.from_parent(session, name=name,
                                               nodeid=f"kernel-harness::{name}", kept=kept))
        for fam, why in check_session.skipped:
            items.append(_UnrunnableFamily.from_parent(
                session, name=f"{fam.name}::-", nodeid=f"kernel-harness::{fam.name}::-",
                why=why))
    for name, why in plan.unrunnable.items():
        items.append(_UnrunnableFamily.from_parent(
            session, name=f"{name}::-", nodeid=f"kernel-harness::{name}::-", why=why))
    return items


class UnitCheck:
    """What the ``kh_unit`` fixture gives a test: :meth:`check` runs its unit."""

    def __init__(self, plan: _Plan, session: CheckSession, unit: Any,
                 kept: UnitResult | None = None) -> None:
        self.plan, self.session, self.unit, self.kept = plan, session, unit, kept

    def check(self) -> UnitResult:
        """Runs the unit (or gives the verdict ``--kh-resume`` kept); fails the test with
        the harness's report unless it passed."""
        result = self.kept if self.kept is not None else self.plan.run(self.session, self.unit)
        return _settle(result, lambda report: pytest.fail(report, pytrace=False))


def parametrize(metafunc: pytest.Metafunc) -> None:
    """Parametrizes a test asking for ``kh_unit`` over the units of ``--kh-family`` (every
    registered family by default) under the other ``--kh-*`` options."""
    config = metafunc.config
    names = config.getoption("--kh-family") or ["all"]
    plan = _plan(config, config.getoption("--kh-check") or names)
    units = [(s, u) for s in plan.sessions.values() for u in s.units]
    params = [pytest.param(UnitCheck(plan, s, u), id=u.name) for s, u in units]
    params += [pytest.param(UnitCheck(plan, s, None, kept=k), id=f"{k.family}::{k.prop}")
               for s in plan.sessions.values() for k in s.resumed.kept]
    params += [pytest.param(None, id=f"{name}::-", marks=pytest.mark.skip(reason=why))
               for name, why in plan.unrunnable.items()]
    metafunc.parametrize("kh_unit", params)


def summary_lines(config: pytest.Config) -> list[str]:
    """What the harness adds to pytest's summary: each family checked differently from its
    registered form (left-out features, those of the project's configuration saying so;
    tolerance overrides), the tpu-interpret diagnostics of the units run in this process
    (their waivers counted by file), and the kernel-branch coverage table of
    ``--kh-kernel-coverage``."""
    plan = config.stash.get(_PLAN_KEY, None)
    if plan is None:
        return []
    sessions = list(plan.sessions.values())
    lines = [f"kernel-harness: {fam.name}: {line}" for s in sessions for fam in s.families
             for line in session_header.adjustment_lines(s, fam)]
    lines += next((s.closing_notes() for s in sessions
                   if s.backend.name == "tpu-interpret" and not s.isolated), [])
    if plan.coverage is None:
        return lines
    from kernel_harness.run import kernel_coverage

    plan.close()
    families = [fam for s in sessions for fam in s.families]
    return lines + kernel_coverage.family_tables(plan.coverage, families)


def finish(config: pytest.Config) -> None:
    """Ends the worker processes of this pytest run's harness sessions."""
    plan = config.stash.get(_PLAN_KEY, None)
    if plan is not None:
        plan.close()
