"""Argument resolution shared by the subcommands: a bad name is a
:class:`~kernel_harness.core.errors.UsageError` (one line on stderr, exit 2)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from kernel_harness.checks.modes import MODES_FIRST_PROFILES
from kernel_harness.core.backends import (
    BACKEND_NAMES,
    Backend,
    BackendUnavailable,
    resolve_backend,
)
from kernel_harness.core.errors import UsageError
from kernel_harness.orchestration import options
from kernel_harness.records.config import HarnessConfig
from kernel_harness.records.family import Family
from kernel_harness.records.registry import UnknownFamily, family_names, get_family
from kernel_harness.run.profiles import PROFILE_NAMES, SHRINK_BUDGETS, ShrinkBudget, get_profile


def families(names: Sequence[str]) -> list[Family]:
    """The named families (all registered ones when ``names`` is empty)."""
    try:
        return [get_family(n) for n in (names or family_names())]
    except UnknownFamily as e:
        raise UsageError(str(e)) from None


def profile(name: str) -> Any:
    """The harness's Hypothesis settings profile ``name``."""
    try:
        return get_profile(name)
    except ValueError as e:
        raise UsageError(str(e)) from None


def backend(name: str) -> Backend:
    """The backend ``name``, resolved on this machine (never a substitute)."""
    try:
        return resolve_backend(name)
    except (ValueError, BackendUnavailable) as e:
        raise UsageError(str(e)) from None


def add_adjustment_flags(parser: Any, *, without: bool) -> None:
    """``--tolerance``, ``--tolerance-scale`` (and ``--without``) on ``parser``."""
    if without:
        parser.add_argument(
            "--without", action="append", default=[], metavar="FEATURE[,FEATURE]",
            help="optional family features the implementation lacks (never drawn); see "
            "`kernel-harness describe FAMILY`",
        )
    parser.add_argument(
        "--tolerance", action="append", default=[], metavar="OUTPUT[:DTYPE]=X",
        help="replace one output's tolerance (max error relative to scale); printed in "
        "the summary and every repro line",
    )
    parser.add_argument(
        "--tolerance-scale", type=float, default=None, metavar="F",
        help="multiply every default tolerance by F (before --tolerance overrides)",
    )


def add_compile_cache_flag(parser: Any) -> None:
    """``--compile-cache DIR|off`` on ``parser`` (see :mod:`kernel_harness.run.compile_cache`)."""
    parser.add_argument("--compile-cache", default=None, metavar="DIR|off",
                        help="persistent compile cache (default $KERNEL_HARNESS_COMPILE_CACHE, "
                        "else ~/.cache/kernel-harness/jax-compile-cache)")


def _shrink_budget(text: str) -> ShrinkBudget:
    try:
        return ShrinkBudget.parse(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


#: ``--shrink-budget``'s help: the profiles' budgets named from their one table.
SHRINK_BUDGET_HELP = (
    "after a property's first failure, shrink it for at most SECONDS and STEPS test calls "
    "(default: the profile's, " + ", ".join(f"{name} {b.seconds:g}/{b.steps}"
                                            for name, b in SHRINK_BUDGETS.items())
    + "); 0: no shrinking, the first failing example is reported as found")


def add_shrink_budget_flag(parser: Any) -> None:
    """``--shrink-budget SECONDS/STEPS|0`` on ``parser`` (:meth:`ShrinkBudget.parse`)."""
    parser.add_argument("--shrink-budget", type=_shrink_budget, default=None,
                        metavar="SECONDS/STEPS", help=SHRINK_BUDGET_HELP)


def add_modes_first_flag(parser: Any) -> None:
    """Adds ``--[no-]modes-first`` (None when neither is given: the profile decides)."""
    parser.add_argument(
        "--modes-first", action=argparse.BooleanOptionalAction, default=None,
        help="matches-reference starts with a few examples that reach every mode the family "
        f"declares (default: in the {' and '.join(sorted(MODES_FIRST_PROFILES))} profiles)")


def add_backend_flag(parser: Any, *, builtin: str = "interpret") -> None:
    """``--backend NAME`` whose default is the user's configured ``backend``
    (``[tool.kernel-harness]``), else ``builtin`` (filled in by :func:`apply_config`)."""
    parser.add_argument("--backend", default=None, metavar="NAME",
                        help=f"one of {', '.join(BACKEND_NAMES)} (default: backend in "
                        f"[tool.kernel-harness] of your pyproject.toml, else {builtin})")
    parser.set_defaults(kh_builtin_backend=builtin)


def add_profile_flag(parser: Any, *, builtin: str) -> None:
    """``--profile NAME`` whose default is the user's configured ``profile``, else
    ``builtin`` (filled in by :func:`apply_config`)."""
    parser.add_argument("--profile", default=None, metavar="NAME",
                        help=f"one of {', '.join(PROFILE_NAMES)} (default: profile in "
                        f"[tool.kernel-harness] of your pyproject.toml, else {builtin})")
    parser.set_defaults(kh_builtin_profile=builtin)


def add_corpus_flag(parser: Any, *, text: str) -> None:
    """``--corpus LOCATION`` whose default is the user's configured ``corpus``
    (``[tool.kernel-harness]``), else none (filled in by :func:`apply_config`)."""
    parser.add_argument("--corpus", default=None, metavar="LOCATION",
                        help=f"{text} (default: corpus in [tool.kernel-harness] of your "
                        "pyproject.toml, else none)")
    parser.set_defaults(kh_builtin_corpus=None)


def apply_config(args: Any, config: HarnessConfig) -> None:
    """Fills ``--backend``, ``--profile`` and ``--corpus`` left unset (flags made by
    :func:`add_backend_flag`, :func:`add_profile_flag` and :func:`add_corpus_flag`) by the
    one rule of every front end (:func:`kernel_harness.orchestration.options.resolve`): an
    explicit flag beats the configuration, which beats the built-in default. Where each
    came from is kept in ``args.kh_settings``, the configuration in ``args.kh_config`` (its
    ``without`` and ``waivers`` go into a check's request). A configured name that is not
    one the harness knows is a UsageError naming the key and the file."""
    builtins = {key: getattr(args, f"kh_builtin_{key}") for key in options.CONFIGURABLE
                if hasattr(args, f"kh_builtin_{key}")}
    resolved = options.settings(config, {k: getattr(args, k, None) for k in builtins},
                                builtins, flags={k: f"--{k}" for k in builtins})
    for key, setting in resolved.items():
        setattr(args, key, setting.value)
    args.kh_settings = resolved
    args.kh_config = config
