"""The pytest plugin (``pytest11`` entry point): options and fixtures, nothing else.

Installing kernel-harness must not change anyone else's test run, so importing
this module registers command-line options only: it imports neither jax nor
the harness, registers no Hypothesis profile and loads none. The fixtures
import the harness when a harness test asks for them.

``pytest --kh-check FAMILY[,FAMILY...]`` collects the harness's properties of those
families (``all``: every registered one) as tests, one per family and property, with ids
like ``hstu::matches-reference``, in any directory; each runs one unit of a
:class:`~kernel_harness.orchestration.session.CheckSession` (:mod:`kernel_harness.testing`),
and a failure shows the harness's report with its repro command.

Options: ``--kh-check``, ``--kh-backend`` (default ``interpret``, or the project's
configured backend under ``--kh-check``), ``--kh-impl
[FAMILY=]MODULE:ATTR`` (repeatable), ``--kh-without [FAMILY=]FEATURE[,FEATURE]``
(repeatable: optional features the implementation lacks; an implementation's own
``kernel_harness_without`` and declared fallback count only with ``--kh-accept-declared``),
``--kh-resume PATH``
(an interrupted run's JSON: its finished units keep their verdicts), ``--kh-family``
(repeatable, restricts the families checked), ``--kh-family-module MODULE`` (repeatable,
out-of-tree families), ``--kh-property`` (repeatable), ``--kh-profile dev|ci|nightly``,
``--kh-max-examples``, ``--kh-seed``,
``--kh-timeout SECONDS`` (units in a worker process: a hang or a native crash is a
failure), ``--kh-isolate``, ``--kh-fail-fast``, ``--kh-shrink-budget SECONDS/STEPS`` (``0``:
no shrinking), ``--kh-tolerance OUTPUT[:DTYPE]=X``,
``--kh-tolerance-scale F`` and ``--force-regen`` (regenerate golden files).

Profiles: the harness properties run under the harness profile chosen by
``--kh-profile``, else by ``--hypothesis-profile`` when it names one (``ci`` or
``kernel-harness-ci``; your own ``ci`` profile still governs your own tests),
else ``dev`` (:func:`kernel_harness.run.profiles.pytest_profile`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from hypothesis import settings

    from kernel_harness.core.backends import Backend


#: The options given once per value (``--kh-impl a=m:f --kh-impl b=m:g``): flag, metavar, help.
_REPEATABLE: tuple[tuple[str, str, str], ...] = (
    ("--kh-impl", "FAMILY=MODULE:ATTR", "replace a family's kernel with your own implementation"),
    ("--kh-without", "FAMILY=FEATURE[,FEATURE]",
     "optional family features your implementation lacks (never drawn)"),
    ("--kh-family", "FAMILY", "only check these families (default: all)"),
    ("--kh-family-module", "MODULE",
     "import MODULE and register the Family objects it declares (out-of-tree family)"),
)


def pytest_addoption(parser: pytest.Parser) -> None:
    """Registers the ``--kh-*`` options (the plugin's only effect at start-up)."""
    group = parser.getgroup("kernel-harness")
    group.addoption("--kh-backend", default=None,
                    help="backend the properties run on (default: backend in [tool.kernel-harness]"
                    " of your pyproject.toml, else interpret)")
    for flag, metavar, text in _REPEATABLE:
        group.addoption(flag, action="append", default=[], metavar=metavar, help=text)
    group.addoption(
        "--kh-profile", default=None, metavar="PROFILE",
        help="harness profile for the harness properties: dev, ci or nightly (default: the "
        "--hypothesis-profile if it names one, else dev)",
    )
    group.addoption(
        "--force-regen", action="store_true", default=False,
        help="rewrite the golden files of the selected families before checking them",
    )
    group.addoption(
        "--kh-check", action="append", default=[], metavar="FAMILY[,FAMILY]",
        help="collect the harness properties of these families as tests (all: every one)",
    )
    group.addoption("--kh-property", action="append", default=[], metavar="PROPERTY",
                    help="only these harness properties (default: all)")
    group.addoption("--kh-max-examples", type=int, default=None, metavar="N")
    group.addoption("--kh-seed", type=int, default=None, metavar="SEED")
    group.addoption("--kh-draws-per-compile", type=int, default=None, metavar="K",
                    help="data draws judged per compiled program (default: the profile's)")
    group.addoption("--kh-timeout", type=float, default=None, metavar="SECONDS",
                    help="per-example limit on the kernel run; units run in a worker process")
    group.addoption("--kh-isolate", action="store_true", default=False,
                    help="run the units in a worker process (a native crash is a failure)")
    group.addoption("--kh-fail-fast", action="store_true", default=False,
                    help="once a family fails a property, its other properties are NOT RUN")
    group.addoption("--kh-shrink-budget", default=None, metavar="SECONDS/STEPS",
                    help="after a property's first failure, shrink for at most SECONDS and "
                    "STEPS test calls (default: the profile's); 0: no shrinking")
    group.addoption("--kh-tolerance", action="append", default=[], metavar="OUTPUT[:DTYPE]=X",
                    help="replace one output's tolerance")
    group.addoption("--kh-tolerance-scale", type=float, default=None, metavar="F",
                    help="multiply every default tolerance by F")
    group.addoption("--kh-kernel-coverage", action="store_true", default=False,
                    help="record which branches of the interpreted kernels the cases ran; "
                    "the table follows the test summary")
    group.addoption("--kh-corpus", default=None, metavar="LOCATION",
                    help="a failure corpus: its stored failures replay first (ci: read only)")
    group.addoption("--kh-accept-declared", action="store_true", default=False,
                    help="accept what an --kh-impl declares about itself: the features it "
                    "lacks and its declared fallback (else only --kh-without narrows the "
                    "check)")
    group.addoption("--kh-resume", default=None, metavar="PATH",
                    help="the check --json document of an interrupted run: its finished "
                    "units keep their verdicts, only the others run")


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    """With ``--kh-check``: appends one test per family and property (nothing otherwise)."""
    if not config.getoption("--kh-check"):
        return
    from kernel_harness import testing

    items.extend(testing.collect(session, config))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test asking for the ``kh_unit`` fixture runs once per family and property."""
    if "kh_unit" in metafunc.fixturenames:
        from kernel_harness import testing

        testing.parametrize(metafunc)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The harness's summary lines (:func:`kernel_harness.testing.summary_lines`): the
    families' adjustments, tpu-interpret diagnostics and ``--kh-kernel-coverage``'s table."""
    import sys

    testing = sys.modules.get("kernel_harness.testing")
    if testing is not None:
        for line in testing.summary_lines(terminalreporter.config):
            terminalreporter.write_line(line)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Ends the worker process of an isolated harness session, if one ran."""
    import sys

    testing = sys.modules.get("kernel_harness.testing")
    if testing is not None:
        testing.finish(session.config)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Makes ``--hypothesis-profile kernel-harness-ci`` loadable; otherwise does nothing."""
    name = config.getoption("--hypothesis-profile", default=None)
    if name and name.startswith("kernel-harness-"):
        from kernel_harness.run import profiles

        profiles.register_profiles()


@pytest.fixture(scope="session")
def kh_profile(request: pytest.FixtureRequest) -> settings:
    """The Hypothesis settings the harness properties apply to themselves."""
    from kernel_harness.run import profiles

    try:
        name = profiles.pytest_profile(
            request.config.getoption("--kh-profile"),
            request.config.getoption("--hypothesis-profile", default=None),
        )
    except ValueError as e:
        raise pytest.UsageError(str(e)) from None
    return profiles.get_profile(name)


@pytest.fixture(scope="session")
def kh_backend(request: pytest.FixtureRequest) -> Backend:
    """The backend asked for with ``--kh-backend``; skipped, with the reason, if absent."""
    from kernel_harness.core.backends import BackendUnavailable, resolve_backend

    name = request.config.getoption("--kh-backend") or "interpret"
    try:
        return resolve_backend(name)
    except BackendUnavailable as e:
        pytest.skip(str(e))
    except ValueError as e:
        raise pytest.UsageError(str(e)) from None


@pytest.fixture(scope="session")
def kh_impls(request: pytest.FixtureRequest) -> dict[str, tuple[Callable[..., Any], str]]:
    """``{family: (implementation, "MODULE:ATTR")}`` from ``--kh-impl``."""
    from kernel_harness.core.errors import UsageError
    from kernel_harness.records.impl import load_impl

    impls = {}
    for item in request.config.getoption("--kh-impl"):
        family, sep, spec = item.partition("=")
        if not sep:
            raise pytest.UsageError(f"--kh-impl must look like FAMILY=MODULE:ATTR, got {item!r}")
        try:
            impls[family] = (load_impl(spec), spec)
        except UsageError as e:
            raise pytest.UsageError(str(e)) from None
    return impls


def family_names_for(config: pytest.Config) -> list[str]:
    """Every registered family name, after loading ``--kh-family-module`` modules
    (used by the property tests' parametrization)."""
    from kernel_harness.core.errors import UsageError
    from kernel_harness.records.registry import family_names, load_family_modules

    try:
        load_family_modules(config.getoption("--kh-family-module"))
    except UsageError as e:
        raise pytest.UsageError(str(e)) from None
    return family_names()


@pytest.fixture(scope="session")
def kh_families(request: pytest.FixtureRequest) -> list[str]:
    """Families selected with ``--kh-family`` (all registered ones if none)."""
    known = family_names_for(request.config)
    chosen = request.config.getoption("--kh-family") or known
    unknown = sorted(set(chosen) - set(known))
    if unknown:
        raise pytest.UsageError(f"unknown --kh-family {unknown}; known: {known}")
    return chosen


@pytest.fixture(scope="session")
def kh_without(request: pytest.FixtureRequest) -> dict[str, frozenset[str]]:
    """``{family: features}`` from ``--kh-without`` (checked when a family is narrowed)."""
    from kernel_harness.records.narrow import parse_features

    out: dict[str, frozenset[str]] = {}
    for item in request.config.getoption("--kh-without"):
        family, sep, features = item.partition("=")
        if not sep or not features:
            raise pytest.UsageError(
                f"--kh-without must look like FAMILY=FEATURE[,FEATURE], got {item!r}"
            )
        out[family] = out.get(family, frozenset()) | parse_features(features)
    return out
