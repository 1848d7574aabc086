"""An implementation checked against the family's call before any case runs, and named by
a path that can be pasted back into ``--impl``.

:func:`bind_impl` runs the family's adapter once on its smallest case with a stand-in
that binds the adapter's arguments to the implementation's signature and stops: an
implementation that cannot take the family's call (a missing parameter, an unexpected
keyword) is a usage error naming the mismatch, within seconds, instead of a "crash" that
Hypothesis would shrink for a minute.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import warnings
from collections.abc import Callable
from typing import Any

import hypothesis

from kernel_harness.core.backends import Backend
from kernel_harness.core.errors import UsageError
from kernel_harness.records.family import Family


class _Bound(Exception):
    """Raised by the stand-in once the adapter's call bound: the probe's normal end."""


class ImplSignatureMismatch(UsageError):
    """The implementation cannot take the call the family's adapter makes."""


def _signature(impl: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(impl)
    except (TypeError, ValueError):  # a builtin or C callable: nothing to bind against
        return None


def _smallest_case(family: Family) -> Any:
    seeds = list(family.seed_cases(family.without))
    if seeds:
        return seeds[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return hypothesis.find(
            family.cases(), lambda case: True,
            settings=hypothesis.settings(database=None, max_examples=50, deadline=None,
                                         suppress_health_check=list(hypothesis.HealthCheck)),
        )


def bind_impl(family: Family, impl: Callable[..., Any], backend: Backend) -> None:
    """Raises :class:`ImplSignatureMismatch` when ``impl`` cannot bind the arguments the
    family's adapter passes to its kernel. Inconclusive probes (no signature to bind, an
    adapter that fails before calling the kernel) say nothing: the run itself will."""
    sig = _signature(impl)
    if sig is None:
        return
    calls: list[str] = []

    def stand_in(*args: Any, **kwargs: Any) -> Any:
        try:
            sig.bind(*args, **kwargs)
        except TypeError as e:
            passed = ", ".join([*(f"<positional {i}>" for i in range(len(args))), *kwargs])
            calls.append(f"{e} (the {family.name} adapter passes: {passed}; the "
                         f"implementation's signature is {sig})")
        raise _Bound

    try:
        case = _smallest_case(family)
        family.run(stand_in, case, case.materialize(), backend)
    except _Bound:
        pass
    except Exception:  # noqa: BLE001 - inconclusive: the run reports whatever this was
        pass
    if calls:
        raise ImplSignatureMismatch(
            f"--impl {impl_spec_of(impl) or getattr(impl, '__qualname__', impl)!s} cannot take "
            f"the {family.name} family's call: {calls[0]}; the family calls: "
            f"{family.impl_signature}")


def impl_spec_of(impl: Callable[..., Any]) -> str | None:
    """``MODULE:ATTR`` under which ``impl`` can be imported back (a factory's product is
    found by the module attribute that holds it), or None when no such path exists."""
    module_name = getattr(impl, "__module__", None)
    if not module_name:
        return None
    module = sys.modules.get(module_name)
    if module is None:
        try:
            module = importlib.import_module(module_name)
        except Exception:  # noqa: BLE001 - not importable: no path to name
            return None
    qualname = getattr(impl, "__qualname__", "")
    if qualname and "<" not in qualname:
        obj: Any = module
        for part in qualname.split("."):
            obj = getattr(obj, part, None)
        if obj is impl:
            return f"{module_name}:{qualname}"
    for attr, value in vars(module).items():
        if value is impl and not attr.startswith("_"):
            return f"{module_name}:{attr}"
    return None
