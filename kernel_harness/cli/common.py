"""Argument resolution shared by the subcommands: a bad name is a
:class:`~kernel_harness.core.errors.UsageError` (one line on stderr, exit 2)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kernel_harness.core.backends import Backend, BackendUnavailable, resolve_backend
from kernel_harness.core.errors import UsageError
from kernel_harness.run.profiles import get_profile
from kernel_harness.spec.family import Family
from kernel_harness.spec.registry import UnknownFamily, family_names, get_family


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
