"""``kernel-harness lower``: lower drawn configurations for TPU on this machine."""

from __future__ import annotations

from typing import Any

from kernel_harness.checks.lowering import lower_case, lower_strategy, traceable_of
from kernel_harness.cli import common
from kernel_harness.core.errors import PropertyNotApplicable, UsageError
from kernel_harness.records.impl import load_impl
from kernel_harness.run import report


def add_parser(sub: Any) -> None:
    """Adds ``kernel-harness lower`` to the subparsers."""
    p = sub.add_parser("lower", help="lower drawn configurations for TPU on this machine")
    p.add_argument("family", nargs="*", help="families (default: all with a traceable hook)")
    p.add_argument("--examples", type=int, default=10, help="cases drawn per family")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--case", default=None, help="lower this one case (JSON; one family)")
    p.add_argument("--impl", default=None, help="MODULE:ATTR replacing the kernel")


def run(args: Any) -> int:
    """Runs ``kernel-harness lower``: exit 0 only if every configuration lowered."""

    families = common.families(args.family)
    impl = load_impl(args.impl) if args.impl else None
    if (args.case or impl) and len(families) != 1:
        raise UsageError("--case and --impl need exactly one family")
    if args.examples < 1:
        raise UsageError("--examples must be at least 1")
    rows, failed, results = [], 0, []
    for fam in families:
        try:
            traceable_of(fam)
        except PropertyNotApplicable as e:
            if args.family:
                raise UsageError(str(e)) from None
            rows.append([fam.name, 0, 0, 0, f"SKIP ({e})"])
            continue
        if args.case:
            try:
                found = [lower_case(fam, fam.case_type.from_json(args.case), impl)]
            except ValueError as e:
                raise UsageError(f"--case: {e}") from None
        else:
            found = lower_strategy(fam, examples=args.examples, seed=args.seed, impl=impl)
        bad = [r for r in found if not r.ok and not r.needs_tpu]
        failed += len(bad)
        results += found
        unknown, lowered = sum(r.needs_tpu for r in found), sum(r.ok for r in found)
        # Nothing lowered and nothing failed (every case needs a real TPU) is no pass.
        verdict = "FAIL" if bad else "PASS" if lowered else "NOT CHECKED"
        failed += verdict == "NOT CHECKED"
        rows.append([fam.name, len(found), lowered, unknown, verdict])
    for r in results:
        print(f"  {r.family:<10} {r.describe()}")
    print()
    print(report.format_table(
        ["family", "configurations", "lowered", "not checkable without a TPU", "verdict"], rows
    ))
    return 1 if failed or not results else 0
