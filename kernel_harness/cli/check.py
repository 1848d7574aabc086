"""``kernel-harness check``: run the properties of families and print a summary table.

Exit 0 only when every property of every family passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import traceback
from typing import Any

import jax

from kernel_harness.checks.properties import PROPERTIES, Observer, PropertyOutcome, run_property
from kernel_harness.cli import common
from kernel_harness.core.backends import BACKEND_NAMES, BackendUnavailable
from kernel_harness.core.errors import PropertyNotApplicable, UsageError
from kernel_harness.run import compile_cache, diagnostics, report
from kernel_harness.run.profiles import PROFILE_NAMES, shrink_budget
from kernel_harness.run.runner import ensure_supported
from kernel_harness.spec.impl import load_impl


def add_parser(sub: Any) -> None:
    """Adds ``kernel-harness check``."""
    check = sub.add_parser("check", help="run the properties of families, print a summary")
    check.add_argument("family", nargs="*", help="families to check (default: all)")
    check.add_argument("--profile", default="dev", help=f"one of {', '.join(PROFILE_NAMES)}")
    check.add_argument("--backend", default="interpret", help=f"one of {', '.join(BACKEND_NAMES)}")
    check.add_argument("--max-examples", type=int, default=None)
    check.add_argument("--seed", type=int, default=None)
    check.add_argument("--impl", default=None, help="MODULE:ATTR replacing the family's kernel")
    check.add_argument(
        "--property", action="append", choices=list(PROPERTIES), help="only these properties"
    )
    check.add_argument("--compile-cache", default=None, metavar="DIR|off",
                       help="persistent compile cache (default $KERNEL_HARNESS_COMPILE_CACHE, "
                       "else ~/.cache/kernel-harness/jax-compile-cache)")
    check.add_argument("--fail-fast", action="store_true",
                       help="once a family fails a property, list its other properties NOT RUN")


def _print_outcome(outcome: PropertyOutcome) -> None:
    obs = outcome.observer
    if outcome.passed:
        return
    print(f"\n=== {outcome.family} / {outcome.prop} FAILED on {outcome.backend.name} ===")
    if obs.last_failure is not None:
        print(report.failure_report(obs.last_failure))
    else:
        err = outcome.error
        print(f"{report.PREFIX} ERROR {outcome.family}: {type(err).__name__}: {err}")
        print("".join(traceback.format_exception(err, limit=-3)).rstrip())
    if outcome.shrink is not None and outcome.shrink.failed:
        print(f"  {outcome.shrink.describe()}")


def _first_failure(text: str) -> None:
    print(f"\n--- first failing example (the full report follows shrinking) ---\n{text}",
          flush=True)


def _collapse_skips(skips: list[list[Any]]) -> list[list[Any]]:
    """One summary row per (family, reason) instead of one per skipped property."""
    grouped: dict[tuple[str, str], list[list[Any]]] = {}
    for row in skips:
        grouped.setdefault((row[0], row[-1]), []).append(row)
    out = []
    for (fam, _reason), group in grouped.items():
        prop = group[0][1] if len(group) == 1 else f"{len(group)} properties"
        out.append([fam, prop, *group[0][2:]])
    return out


def run(args: argparse.Namespace) -> int:
    """Runs ``kernel-harness check``."""
    cache_note = compile_cache.enable(args.compile_cache)
    families = common.families(args.family)
    profile = common.profile(args.profile)
    backend = common.backend(args.backend)
    impl = load_impl(args.impl) if args.impl else None
    if impl is not None and len(families) != 1:
        raise UsageError("--impl replaces one family's kernel: name exactly one family")
    if args.max_examples is not None and args.max_examples < 1:
        raise UsageError("--max-examples must be at least 1")
    runnable, skipped = [], []
    for fam in families:
        try:
            ensure_supported(fam, backend)
            runnable.append(fam)
        except BackendUnavailable as e:
            if args.family:
                raise UsageError(str(e)) from None
            skipped.append((fam, str(e)))
    print(
        f"kernel-harness check: backend {backend.name} ({backend.note}), profile {args.profile}, "
        f"jax {jax.__version__}, families {', '.join(f.name for f in runnable) or '-'}"
    )
    print(f"  {cache_note}; shrink budget {shrink_budget(args.profile)}", flush=True)
    outcomes: list[PropertyOutcome] = []
    not_applicable: list[list[Any]] = []
    not_run: list[list[Any]] = []
    for fam in runnable:
        failed_first: str | None = None
        for name in args.property or list(PROPERTIES):
            if args.fail_fast and failed_first is not None:
                why = f"NOT RUN (--fail-fast: {failed_first} failed)"
                not_run.append([fam.name, name, backend.name, 0, 0, 0, "-", why])
                print(f"  {fam.name:<12} {name:<20} {why}", flush=True)
                continue
            observer = Observer()
            try:
                prop = PROPERTIES[name](
                    fam, backend=backend, impl=impl, impl_spec=args.impl, observer=observer
                )
            except PropertyNotApplicable as e:
                not_applicable.append([fam.name, name, backend.name, 0, 0, 0, "-", f"SKIP ({e})"])
                print(f"  {fam.name:<12} {name:<20} SKIP (not applicable: {e})", flush=True)
                continue
            outcome = run_property(
                name, fam, prop, backend=backend, observer=observer, profile=profile,
                max_examples=args.max_examples, seed=args.seed,
                shrink_budget=shrink_budget(args.profile), on_first_failure=_first_failure,
            )
            outcomes.append(outcome)
            if not outcome.passed and failed_first is None:
                failed_first = name
            _print_outcome(outcome)
            print(
                f"  {fam.name:<12} {name:<20} {'PASS' if outcome.passed else 'FAIL'} "
                f"({outcome.observer.examples} examples, {outcome.wall_seconds:.1f}s)",
                flush=True,
            )
    for fam in runnable:
        events = [o.observer.events for o in outcomes if o.family == fam.name]
        total = sum(events, start=type(events[0])()) if events else {}
        if total:
            print(f"\ncases reached by {fam.name} (examples per event):")
            print("  " + ", ".join(f"{k}={v}" for k, v in sorted(total.items())))
    rows = [
        [o.family, o.prop, o.backend.name, o.observer.examples, o.observer.passed,
         o.observer.examples - o.observer.passed + (o.observer.last_failure is None
                                                    and not o.passed),
         f"{o.wall_seconds:.1f}s", "PASS" if o.passed else "FAIL"]
        for o in outcomes
    ]
    rows += not_run + _collapse_skips(not_applicable)
    rows += [[f.name, "-", backend.name, 0, 0, 0, "-", f"SKIP ({why})"] for f, why in skipped]
    print()
    print(report.format_table(
        ["family", "property", "backend", "examples", "passed", "failed", "time", "verdict"], rows
    ))
    if backend.name == "tpu-interpret":
        print(diagnostics.summary_line())
    ok = all(o.passed for o in outcomes) and bool(outcomes)
    print(f"\n{'PASS' if ok else 'FAIL'}: {sum(o.passed for o in outcomes)}/{len(outcomes)} "
          f"properties passed on backend {backend.name}")
    return 0 if ok else 1
