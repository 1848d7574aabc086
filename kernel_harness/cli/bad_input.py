"""``kernel-harness bad-input``: each family's invalid configurations must raise a clear error."""

from __future__ import annotations

from typing import Any

from kernel_harness.checks.bad_input import check_family
from kernel_harness.cli import common
from kernel_harness.core.errors import UsageError


def add_parser(sub: Any) -> None:
    """Adds ``kernel-harness bad-input`` to the subparsers."""
    p = sub.add_parser("bad-input", help="run each family's invalid configurations")
    p.add_argument("family", nargs="*", help="families (default: all that declare a list)")


def run(args: Any) -> int:
    """Exit 0 only if every entry behaved as declared (unclear/silent ones are reported
    as findings every time)."""

    declared = [f for f in common.families([]) if f.bad_inputs is not None]
    chosen = common.families(args.family) if args.family else declared
    unknown = [f.name for f in chosen if f.bad_inputs is None]
    if unknown:
        raise UsageError(f"no bad-input list for {unknown} (Family.bad_inputs); lists exist "
                         f"for {', '.join(f.name for f in declared)}")
    results = [r for family in chosen for r in check_family(family)]
    for r in results:
        print(r.describe())
    findings = [r for r in results if r.observed != "clear"]
    changed = [r for r in results if not r.as_declared]
    print(f"\n{len(results)} invalid configurations: {len(results) - len(findings)} raised a "
          f"clear error, {len(findings)} did not (findings), {len(changed)} changed since declared")
    return 1 if changed else 0
