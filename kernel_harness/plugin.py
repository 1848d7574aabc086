"""The pytest plugin (``pytest11`` entry point): options and fixtures.

Options: ``--kh-backend`` (default ``interpret``), ``--kh-impl FAMILY=MODULE:ATTR``
(repeatable), ``--kh-without FAMILY=FEATURE[,FEATURE]`` (repeatable: optional
features the implementation lacks; an implementation's own ``kernel_harness_without``
counts too), ``--kh-family`` (repeatable, restricts the families checked) and
``--force-regen`` (regenerate golden files; without it a missing golden fails).
Hypothesis profiles (``dev``, ``ci``, ``nightly``) are registered on import,
so ``--hypothesis-profile ci`` works; without it the ``dev`` profile is used.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import settings

from kernel_harness.core.backends import Backend, BackendUnavailable, resolve_backend
from kernel_harness.run import profiles

profiles.register_profiles()
settings.load_profile("dev")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kernel-harness")
    group.addoption("--kh-backend", default="interpret", help="backend the properties run on")
    group.addoption(
        "--kh-impl", action="append", default=[], metavar="FAMILY=MODULE:ATTR",
        help="replace a family's kernel with your own implementation",
    )
    group.addoption(
        "--kh-without", action="append", default=[], metavar="FAMILY=FEATURE[,FEATURE]",
        help="optional family features your implementation lacks (never drawn)",
    )
    group.addoption(
        "--kh-family", action="append", default=[], metavar="FAMILY",
        help="only check these families (default: all)",
    )
    group.addoption(
        "--force-regen", action="store_true", default=False,
        help="rewrite the golden files of the selected families before checking them",
    )


@pytest.fixture(scope="session")
def kh_backend(request: pytest.FixtureRequest) -> Backend:
    """The backend asked for with ``--kh-backend``; skipped, with the reason, if absent."""
    name = request.config.getoption("--kh-backend")
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
    from kernel_harness.spec.impl import load_impl

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


@pytest.fixture(scope="session")
def kh_families(request: pytest.FixtureRequest) -> list[str]:
    """Families selected with ``--kh-family`` (all registered ones if none)."""
    from kernel_harness.spec.registry import family_names

    chosen = request.config.getoption("--kh-family") or family_names()
    unknown = sorted(set(chosen) - set(family_names()))
    if unknown:
        raise pytest.UsageError(f"unknown --kh-family {unknown}; known: {family_names()}")
    return chosen


@pytest.fixture(scope="session")
def kh_without(request: pytest.FixtureRequest) -> dict[str, frozenset[str]]:
    """``{family: features}`` from ``--kh-without`` (checked when a family is narrowed)."""
    from kernel_harness.spec.narrow import parse_features

    out: dict[str, frozenset[str]] = {}
    for item in request.config.getoption("--kh-without"):
        family, sep, features = item.partition("=")
        if not sep or not features:
            raise pytest.UsageError(
                f"--kh-without must look like FAMILY=FEATURE[,FEATURE], got {item!r}"
            )
        out[family] = out.get(family, frozenset()) | parse_features(features)
    return out
