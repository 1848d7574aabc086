"""What a check session takes from the project's ``[tool.kernel-harness]`` beyond the
settings of :mod:`~kernel_harness.orchestration.options`: the features its ``without``
and its ``known-bugs`` leave out of a family, and its waivers of TPU-interpret findings;
and what the user accepts of an implementation's declarations about itself
(:func:`accepted`).

Never a silent exclusion: a feature the table leaves out is reported as a ``--without``
is, and says it came from the file (:func:`narrow_family`); the user's waivers are
counted by file and each waived finding names its waiver
(:mod:`kernel_harness.run.diagnostics`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from kernel_harness.core.errors import UsageError
from kernel_harness.orchestration.request import CheckRequest
from kernel_harness.records.config import HarnessConfig
from kernel_harness.records.family import Family
from kernel_harness.records.kernels import accepted_fallback
from kernel_harness.records.narrow import check_features, checked_without, narrow
from kernel_harness.run.diagnostics import Waiver
from kernel_harness.run.diagnostics import user_waivers as waivers_of


def where(request: CheckRequest, key: str) -> str:
    """``KEY in /x/pyproject.toml [tool.kernel-harness]`` for the request's project."""
    return HarnessConfig(source=Path(request.config_source or "pyproject.toml")).where(key)


def narrow_family(family: Family, given: Iterable[str], request: CheckRequest
                  ) -> tuple[Family, dict[str, str]]:
    """``family`` without the features ``given`` (the front end's, for every family), the
    request's ``without_by_family`` for it and those the project's ``without`` names for
    it, and where each of the latter came from, in words. A feature of the table that the
    family does not know is a :class:`UsageError` naming the file and the family's known
    features."""
    given = frozenset(given) | request.without_by_family.get(family.name, frozenset())
    configured = request.config_without.get(family.name, frozenset())
    try:
        check_features(family, configured)
    except UsageError as e:
        raise UsageError(f"{where(request, 'without')}: {e}") from None
    origins = dict.fromkeys(sorted(configured), f"from {where(request, 'without')}")
    bugs = known_bugs(family, request)
    origins.update(bugs)
    return narrow(family, given | configured | set(bugs)), origins


def check_family_names(request: CheckRequest, known: Iterable[str]) -> None:
    """Raises a :class:`UsageError` naming the file where the project's ``without`` or
    ``known-bugs`` names a family that is not registered (a typo would leave nothing out,
    silently)."""
    known = set(known)
    for key, names in (("without", request.config_without),
                       ("known-bugs", [b["family"] for b in request.known_bugs])):
        unknown = sorted(set(names) - known)
        if unknown:
            raise UsageError(f"{where(request, key)}: no family named {unknown[0]!r} is "
                             f"registered; known: {', '.join(sorted(known))}")


#: How the origin of a feature a known bug left out begins (reports, the JSON's
#: ``known_bugs``).
KNOWN_BUG = "known bug: "


def known_bugs(family: Family, request: CheckRequest) -> dict[str, str]:
    """The features the project's ``known-bugs`` leave out of ``family``, each with the
    words every report gives it: ``known bug: REASON (LINK), from known-bugs in FILE``. A
    feature the family does not know is a :class:`UsageError` naming the entry's file."""
    found: dict[str, str] = {}
    for bug in request.known_bugs:
        if bug["family"] != family.name:
            continue
        try:
            check_features(family, bug["without"])
        except UsageError as e:
            raise UsageError(f"{where(request, 'known-bugs')}: {e}") from None
        link = f" ({bug['link']})" if bug.get("link") else ""
        for feature in bug["without"]:
            found[feature] = (f"{KNOWN_BUG}{bug['reason']}{link}, from "
                              f"{where(request, 'known-bugs')}")
    return found


def user_waivers(request: CheckRequest) -> tuple[Waiver, ...]:
    """The request's waivers (the project's ``[[tool.kernel-harness.waivers]]``) as
    :class:`~kernel_harness.run.diagnostics.Waiver` s naming their file; a malformed
    entry (a request built by hand) is a :class:`UsageError` naming it."""
    try:
        return waivers_of(request.waivers, request.config_source or "pyproject.toml")
    except ValueError as e:
        raise UsageError(f"{where(request, 'waivers')}: {e}") from None


def accepted(request: CheckRequest, impl: Callable[..., Any] | None
             ) -> tuple[frozenset[str], Callable[..., Any] | None, str | None]:
    """``(without, impl, note)``: the features the check leaves out (the user's, and what
    ``impl`` declares it lacks where the user accepts its declarations), ``impl`` as the
    check takes it (its declared fallback honoured only then) and a note on what it
    declared and the check did not accept (None if nothing)."""
    without, without_note = checked_without(request.without, request.without_by_family, impl,
                                            accept_declared=request.accept_declared)
    impl, fallback_note = accepted_fallback(impl, accept=request.accept_declared)
    return without, impl, "; ".join(n for n in (without_note, fallback_note) if n) or None
