"""Checking an implementation that does less, or differently, than the family's kernel.

* Declared capabilities: an implementation without some of a family's optional
  features (sdpa's ``bias``, ``window``...) says so, with the :func:`without`
  decorator, a ``kernel_harness_without`` attribute, ``--without`` on the command
  line or ``--kh-without`` in pytest. :func:`narrow` returns the family whose
  strategy no longer draws them; an unknown name is an error listing the known
  ones, and nothing the user did not name is ever left out.
* Tolerance overrides: :func:`adjust_tolerances` returns the family judged with
  ``--tolerance``/``--tolerance-scale``, and records the flags in
  ``Family.adjustments`` so every summary and repro line shows them.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from kernel_harness.core.case import DTYPES
from kernel_harness.core.errors import UsageError
from kernel_harness.core.tolerance import ToleranceOverride, merge_tolerances
from kernel_harness.records.family import Family

#: The attribute an implementation sets to declare the features it lacks.
WITHOUT_ATTR = "kernel_harness_without"

F = TypeVar("F", bound=Callable[..., Any])


def without(*features: str) -> Callable[[F], F]:
    """Decorator declaring the optional family features an implementation lacks::

        @kernel_harness.without("bias", "window")
        def my_attention(query, key, value, bias=None, mask=None, **options): ...

    The names are checked against the family when the implementation is used.
    """
    names = parse_features(features)

    def mark(fn: F) -> F:
        setattr(fn, WITHOUT_ATTR, names)
        return fn

    return mark


def parse_features(items: Iterable[str] | str | None) -> frozenset[str]:
    """``"bias,window"`` or ``["bias", "window"]`` (or None) as a frozenset of names."""
    if items is None:
        return frozenset()
    if isinstance(items, str):
        items = [items]
    return frozenset(p.strip() for item in items for p in item.split(",") if p.strip())


def declared_without(impl: Callable[..., Any] | None) -> frozenset[str]:
    """What ``impl`` declares it lacks (its ``kernel_harness_without``), or nothing."""
    if impl is None:
        return frozenset()
    declared = getattr(impl, WITHOUT_ATTR, None)
    if declared is None and isinstance(impl, functools.partial):
        declared = getattr(impl.func, WITHOUT_ATTR, None)
    if declared is None:
        return frozenset()
    if isinstance(declared, str) or not isinstance(declared, Iterable):
        raise UsageError(
            f"{WITHOUT_ATTR} must be a set of feature names, got {declared!r}"
        )
    return parse_features(list(declared))


def checked_without(given: Iterable[str], by_family: Mapping[str, Iterable[str]],
                    impl: Callable[..., Any] | None, *, accept_declared: bool
                    ) -> tuple[frozenset[str], str | None]:
    """The features a check leaves out, and a note on what it does not: the user's
    (``given``; ``by_family`` are the user's too, applied per family); the features the
    implementation declares it lacks only where the user accepts its declaration
    (``accept_declared``): an implementation must not narrow its own check (a kernel wrong
    exactly where it declares itself lacking would pass). The note names what was
    declared and not left out, and how the user allows it."""
    user = parse_features(list(given))
    declared = declared_without(impl)
    if accept_declared:
        return user | declared, None
    ignored = declared - user - {f for fs in by_family.values() for f in fs}
    if not ignored:
        return user, None
    names = ", ".join(sorted(ignored))
    return user, (f"the implementation declares it lacks {names}: NOT left out (only the "
                  f"user narrows a check: --without {names.replace(', ', ',')} or "
                  "--accept-declared)")


def narrow(family: Family, features: Iterable[str]) -> Family:
    """``family`` drawing no case that uses ``features`` (its optional feature names).

    Raises :class:`UsageError` for a name the family does not know, listing the
    known ones. With no features, returns ``family`` unchanged.
    """
    names = frozenset(features)
    if not names:
        return family
    check_features(family, names)
    drawn = drawn_dtypes(family)
    dtypes = names & set(drawn)
    features = (names | family.without) - set(DTYPES)
    cases = functools.partial(family.cases, without=features) if features else family.cases
    seed_cases = family.seed_cases
    if dtypes:
        left = tuple(d for d in drawn if d not in dtypes)
        if not left:
            raise UsageError(f"family {family.name!r} draws {', '.join(drawn)}: without "
                             f"{', '.join(sorted(dtypes))} no dtype is left")
        cases = functools.partial(cases, dtypes=left)
        seed_cases = _seeds_in(family.seed_cases, left)
    mode_cases = {mode: _in_dtypes(strategy, dtypes) for mode, strategy in
                  family.mode_cases.items()} if dtypes else family.mode_cases
    narrowed = dataclasses.replace(family, cases=cases, without=names | family.without,
                                   seed_cases=seed_cases, mode_cases=mode_cases)
    return family.narrowed(narrowed, features) if family.narrowed else narrowed


def check_features(family: Family, features: Iterable[str]) -> None:
    """A :class:`UsageError` listing ``family``'s known features (its optional ones and the
    dtypes it draws) when ``features`` names another."""
    drawn = drawn_dtypes(family)
    unknown = frozenset(features) - set(family.optional) - set(drawn)
    if unknown:
        known = ", ".join([*sorted(family.optional), *drawn]) or \
            "none (this family cannot be narrowed)"
        raise UsageError(
            f"family {family.name!r} has no optional feature {', '.join(sorted(unknown))}; "
            f"known: {known}"
        )


def drawn_dtypes(family: Family) -> tuple[str, ...]:
    """The dtypes ``family``'s strategy draws (its ``dtypes`` parameter, narrowed or not),
    each a feature ``--without`` can leave out; () where it takes no such parameter."""
    try:
        parameter = inspect.signature(family.cases).parameters.get("dtypes")
    except (TypeError, ValueError):
        return ()
    if parameter is None:
        return ()
    value, cases = parameter.default, family.cases
    while isinstance(cases, functools.partial):  # the outermost narrowing is the latest
        if "dtypes" in cases.keywords:
            value = cases.keywords["dtypes"]
            break
        cases = cases.func
    return tuple(value) if isinstance(value, tuple | list) else ()


def _in_dtypes(strategy: Callable[[], Any], excluded: frozenset[str]) -> Callable[[], Any]:
    return lambda: strategy().filter(lambda case: case.dtype not in excluded)


def _seeds_in(seed_cases: Callable[[frozenset[str]], Any], dtypes: tuple[str, ...]
              ) -> Callable[[frozenset[str]], list[Any]]:
    def seeds(without: frozenset[str]) -> list[Any]:
        # the family's own seeds know its features; the dtypes are narrow's
        return [c for c in seed_cases(frozenset(without) - set(DTYPES)) if c.dtype in dtypes]

    return seeds


def unnarrowed_cases(family: Family) -> Callable[..., Any]:
    """``family``'s strategy before :func:`narrow` (its ``cases`` with no ``without``):
    what the user's ``--without`` left out is measured against it."""
    cases = family.cases
    while isinstance(cases, functools.partial) and "without" in cases.keywords:
        cases = cases.func
    return cases


def parse_tolerance(text: str) -> ToleranceOverride:
    """``OUTPUT[:DTYPE]=X`` as a :class:`ToleranceOverride` (a UsageError if malformed)."""
    key, sep, value = text.partition("=")
    output, _, dtype = key.partition(":")
    try:
        limit = float(value)
    except ValueError:
        limit = -1.0
    if not sep or not output.strip() or not 0 < limit < 1:
        raise UsageError(
            f"--tolerance must look like OUTPUT[:DTYPE]=X with 0 < X < 1, got {text!r}"
        )
    return ToleranceOverride(output=output.strip(), dtype=dtype.strip() or None, max_rel_err=limit)


def adjust_tolerances(
    family: Family, overrides: Iterable[str] = (), scale: float | None = None
) -> Family:
    """``family`` judged with ``--tolerance`` overrides and a ``--tolerance-scale``;
    the flags are appended to ``family.adjustments``. Unchanged if neither is given."""
    texts = list(overrides)
    if not texts and scale is None:
        return family
    try:
        table = merge_tolerances(family.tolerances, [parse_tolerance(t) for t in texts], scale)
    except ValueError as e:
        raise UsageError(f"{family.name}: {e}") from None
    flags: list[str] = []
    if scale is not None:
        flags += ["--tolerance-scale", f"{scale:g}"]
    for t in texts:
        flags += ["--tolerance", t]
    return dataclasses.replace(
        family, tolerances=table, adjustments=(*family.adjustments, *flags)
    )


def describe_adjustments(family: Family, origins: Mapping[str, str] | None = None
                         ) -> list[str]:
    """Lines naming how ``family`` differs from its registered form (empty if it does not).
    ``origins``: where a left-out feature came from, in words, where not from the command
    line (``from without in /x/pyproject.toml [tool.kernel-harness]``), said after it."""
    lines = []
    if family.without:
        origins = origins or {}
        parts = [", ".join(sorted(family.without - set(origins)))]
        by_origin: dict[str, list[str]] = {}
        for feature in sorted(family.without & set(origins)):
            by_origin.setdefault(origins[feature], []).append(feature)
        parts += [f"{', '.join(names)} ({origin})" for origin, names in by_origin.items()]
        lines.append(f"checked without: {', '.join(filter(None, parts))}")
    if family.adjustments:
        lines.append(
            "tolerances NOT the family's defaults: " + " ".join(family.adjustments)
        )
    return lines
