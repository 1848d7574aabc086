"""``kernel-harness repro``: rerun exactly one case (printed by a failure)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from kernel_harness.checks.flaky import Flaky, FlakyExample, passed_rerun
from kernel_harness.checks.matches_reference import HarnessFailure
from kernel_harness.checks.metamorphic import MetamorphicFailure
from kernel_harness.checks.metamorphic.repro import replay
from kernel_harness.cli import common, plot
from kernel_harness.core.backends import BackendUnavailable
from kernel_harness.core.errors import UsageError
from kernel_harness.records.impl import load_impl
from kernel_harness.records.narrow import adjust_tolerances, describe_adjustments
from kernel_harness.run import report
from kernel_harness.run.crash import Crash, KernelCrash
from kernel_harness.run.outputs import ensure_writable
from kernel_harness.run.runner import check_case, ensure_supported, impl_name


def add_parser(sub: Any) -> None:
    """Adds ``kernel-harness repro``."""
    repro = sub.add_parser("repro", help="rerun one case printed by a failure")
    repro.add_argument("family")
    repro.add_argument("--case", required=True, help="the case as one JSON line")
    common.add_backend_flag(repro)
    repro.add_argument("--impl", default=None)
    repro.add_argument("--property", default="matches-reference",
                       help="the property to replay (a metamorphic one needs --draws)")
    repro.add_argument("--draws", default=None, metavar="JSON",
                       help="what a metamorphic example drew besides its case, as printed "
                            "by its failure")
    repro.add_argument("--plot", type=Path, default=None, metavar="PATH.png",
                       help="draw where the error lives (needs the [plot] extra: matplotlib)")
    common.add_adjustment_flags(repro, without=False)


def run(args: argparse.Namespace) -> int:
    """Runs ``kernel-harness repro``: 0 pass, 1 fail (a failing case runs a second time:
    one that passes then is reported FLAKY, :mod:`kernel_harness.checks.flaky`)."""
    ensure_writable({"--plot": args.plot})
    (fam,) = common.families([args.family])
    fam = adjust_tolerances(fam, args.tolerance, args.tolerance_scale)
    backend = common.backend(args.backend)
    impl = load_impl(args.impl) if args.impl else None
    try:
        case = fam.case_type.from_json(args.case)
    except ValueError as e:
        raise UsageError(f"--case: {e}") from None
    try:
        ensure_supported(fam, backend)
    except BackendUnavailable as e:
        raise UsageError(str(e)) from None
    if args.property != "matches-reference":
        return _replay_metamorphic(args, fam, case, backend, impl)
    if args.draws is not None:
        raise UsageError("--draws belongs to a metamorphic --property")
    if args.plot is not None:
        plot.require_matplotlib()  # before the run: a missing extra is one line, not a late crash
    try:
        result = check_case(fam, case, backend, impl, impl_spec=args.impl)
    except UsageError:
        raise
    except Exception as e:  # noqa: BLE001 - a crash replays as the same CRASH report
        crash = Crash(family=fam.name, case=case, backend=backend,
                      impl=args.impl or impl_name(fam.kernel), impl_spec=args.impl,
                      adjustments=fam.adjustments, error=e)
        print(_flaky_or(KernelCrash(crash), args, fam, case, backend, impl))
        return 1
    if args.plot is not None:
        print(f"picture: {plot.plot_case(fam, case, backend, impl, args.plot)}")
    for line in describe_adjustments(fam):
        print(f"{fam.name}: {line}")
    if result.passed:
        print(f"PASS {fam.name} on {backend.name}: {case!r}")
        print(report.stats_table(result.verdicts))
        for name, why in result.not_compared.items():
            print(f"not compared: {name} ({why}; the adapter supplies it on both sides)")
        return 0
    print(_flaky_or(HarnessFailure(result), args, fam, case, backend, impl))
    return 1


def _flaky_or(failure: HarnessFailure | KernelCrash, args: argparse.Namespace, fam: Any,
              case: Any, backend: Any, impl: Any) -> str:
    """The failing run's report, or the FLAKY report when the case, run a second time,
    passes (as Hypothesis replays a failing example before it reports it)."""
    try:
        again = check_case(fam, case, backend, impl, impl_spec=args.impl)
    except Exception:  # noqa: BLE001 - failed again (differently): the first run's report
        return str(failure)
    if not again.passed:
        return str(failure)
    return Flaky(family=fam.name, prop="matches-reference", backend=backend.name,
                 first=failure, rerun=passed_rerun(again)).report()


def _replay_metamorphic(args: argparse.Namespace, fam: Any, case: Any, backend: Any,
                        impl: Any) -> int:
    """Replays one metamorphic example: 0 the relation holds, 1 it does not."""
    if args.draws is None:
        raise UsageError(f"--property {args.property} needs --draws (printed by its failure)")
    try:
        replay(fam, args.property, case, backend, args.draws, impl, impl_spec=args.impl)
    except (MetamorphicFailure, KernelCrash, FlakyExample) as e:  # each message is its report
        print(e)
        return 1
    except ValueError as e:
        raise UsageError(str(e)) from None
    print(f"PASS {fam.name} {args.property} on {backend.name}: {case!r}")
    return 0
