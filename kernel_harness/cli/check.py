"""``kernel-harness check``: run the properties of families and print a summary table.

Exit 0 only when every property of every family passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import traceback
from pathlib import Path
from typing import Any

import jax

from kernel_harness.checks.metamorphic import MetamorphicFailure
from kernel_harness.checks.properties import (
    PROPERTIES,
    HarnessFailure,
    Observer,
    PropertyOutcome,
    build_property,
    run_property,
)
from kernel_harness.cli import common, plot, results, watch
from kernel_harness.core.backends import BACKEND_NAMES, BackendUnavailable
from kernel_harness.core.errors import PropertyNotApplicable, UsageError
from kernel_harness.run import compile_cache, diagnostics, report
from kernel_harness.run.crash import KernelCrash
from kernel_harness.run.profiles import (
    PROFILE_NAMES,
    draws_per_compile,
    short_name,
    shrink_budget,
)
from kernel_harness.run.runner import ensure_supported
from kernel_harness.spec import registry
from kernel_harness.spec.impl import load_impl
from kernel_harness.spec.narrow import (
    adjust_tolerances,
    declared_without,
    describe_adjustments,
    narrow,
    parse_features,
)


def add_parser(sub: Any) -> None:
    """Adds ``kernel-harness check``."""
    check = sub.add_parser("check", help="run the properties of families, print a summary")
    check.add_argument("family", nargs="*", help="families to check (default: all)")
    check.add_argument("--profile", default="dev", help=f"one of {', '.join(PROFILE_NAMES)}")
    check.add_argument("--backend", default="interpret", help=f"one of {', '.join(BACKEND_NAMES)}")
    check.add_argument("--max-examples", type=int, default=None)
    check.add_argument("--seed", type=int, default=None)
    check.add_argument("--draws-per-compile", type=int, default=None, metavar="K",
                       help="data draws judged per compiled program (default: the profile's)")
    check.add_argument("--impl", default=None, help="MODULE:ATTR replacing the family's kernel")
    check.add_argument(
        "--property", action="append", choices=list(PROPERTIES), help="only these properties"
    )
    check.add_argument("--json", type=Path, default=None, metavar="PATH",
                       help="write machine-readable results (schema: check-results-v1.json)")
    check.add_argument("--junit", type=Path, default=None, metavar="PATH",
                       help="write JUnit XML, one testcase per family x property")
    check.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                       help="per-example limit on the kernel run (a hang is a FAIL and the run "
                       "goes on); runs each family in a worker process; nightly: 900, 0: off")
    check.add_argument("--progress-every", type=float, default=30.0, metavar="SECONDS",
                       help="print progress (examples, rate, failures) at most this often")
    check.add_argument("--plot-dir", type=Path, default=None, metavar="DIR",
                       help="a picture of each failing case: DIR/FAMILY-PROPERTY.png")
    check.add_argument("--heartbeat-file", default=None, help=argparse.SUPPRESS)
    common.add_adjustment_flags(check, without=True)
    common.add_compile_cache_flag(check)
    check.add_argument("--all-bugs", action="store_true",
                       help="keep drawing after a property's first failure to report every "
                       "distinct failure and crash kind (slower; default: stop at the first)")
    check.add_argument("--fail-fast", action="store_true",
                       help="once a family fails a property, list its other properties NOT RUN")


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for e in error.exceptions for leaf in _leaves(e)]
    return [error]


def _print_crashes(obs: Observer, crashes: list[KernelCrash]) -> None:
    """One report per crash kind (the smallest example Hypothesis found), with a count."""
    shown: dict[str, str] = {}
    for leaf in crashes:
        shown[leaf.crash.kind] = str(leaf)
    for kind, (_, crash) in obs.crashes.items():
        shown.setdefault(kind, crash.report())
    for i, (kind, text) in enumerate(shown.items(), 1):
        count = obs.crashes.get(kind, (0, None))[0]
        print(f"--- crash kind {i} of {len(shown)}: {kind} ({count} examples) ---")
        print(text)


def _print_outcome(outcome: PropertyOutcome) -> None:
    obs = outcome.observer
    if outcome.passed:
        return
    print(f"\n=== {outcome.family} / {outcome.prop} FAILED on {outcome.backend.name} ===")
    leaves = _leaves(outcome.error) if outcome.error is not None else []
    # A metamorphic failure is a failure (its report ends with one reproduce command), not
    # an error with a traceback.
    failures = [e for e in leaves if isinstance(e, HarnessFailure | MetamorphicFailure)]
    crashes = [e for e in leaves if isinstance(e, KernelCrash)]
    others = [e for e in leaves
              if not isinstance(e, HarnessFailure | MetamorphicFailure | KernelCrash)]
    for failure in failures:
        print(str(failure))
    if not failures and obs.last_failure is not None:
        print(report.failure_report(obs.last_failure))
    if crashes or obs.crashes:
        _print_crashes(obs, crashes)
    for err in others:
        print(f"{report.PREFIX} ERROR {outcome.family}: {type(err).__name__}: {err}")
        print("".join(traceback.format_exception(err, limit=-3)).rstrip())
    if outcome.shrink is not None and outcome.shrink.failed:
        print(f"  {outcome.shrink.describe()}")


def _first_failure(text: str) -> None:
    print(f"\n--- first failing example (the full report follows shrinking) ---\n{text}",
          flush=True)


def _verdict(outcome: PropertyOutcome) -> str:
    """PASS; FAIL (with the crash kinds); ERROR when no example failed yet the run did
    not pass (a health check, a flaky test): never "passed 2, failed 1"."""
    if outcome.passed:
        return "PASS"
    obs = outcome.observer
    if obs.failed == 0:
        return "ERROR"
    kinds = len(obs.crashes)
    return f"FAIL ({kinds} crash kind{'s' * (kinds != 1)})" if kinds else "FAIL"


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


def _write_results(args: argparse.Namespace, backend: Any, outcomes: list[PropertyOutcome],
                   not_applicable: list[list[Any]], skipped: list[Any],
                   records: list[dict[str, Any]] | None = None) -> None:
    if args.json is None and args.junit is None:
        return
    if records is None:
        records = [results.outcome_record(o) for o in outcomes]
        records += [results.skip_record(r[0], r[1], backend.name, r[-1].removeprefix("SKIP (")
                                        .removesuffix(")") if r[-1].startswith("SKIP (")
                                        else r[-1])
                    for r in not_applicable]
    records = records + [results.skip_record(f.name, "-", backend.name, why)
                         for f, why in skipped]
    # What was excluded: the --without flags and what the --impl declares it lacks.
    adjustments = {"without": sorted(args.effective_without),
                   "tolerance": list(args.tolerance), "tolerance_scale": args.tolerance_scale}
    env = results.environment(backend, profile=args.profile, seed=args.seed,
                              max_examples=args.max_examples, impl=args.impl,
                              adjustments=adjustments)
    doc = results.document(env, records)
    if args.json is not None:
        results.write_json(args.json, doc)
        print(f"results: {args.json} (JSON, schema version {results.SCHEMA_VERSION})")
    if args.junit is not None:
        results.write_junit(args.junit, doc)
        print(f"results: {args.junit} (JUnit XML)")


def _run_supervised(args: argparse.Namespace, runnable: list[Any], skipped: list[Any],
                    backend: Any) -> int:
    """``--timeout``: each family's properties in a worker process under the time limit."""
    print(f"  (--timeout {args.timeout:g}s per example: each family runs in a worker process)")

    def child_args(family: str) -> Any:
        def build(props: list[str], heartbeat: str) -> list[str]:
            argv = ["check", family, "--profile", args.profile, "--backend", backend.name,
                    "--heartbeat-file", heartbeat, "--progress-every", str(args.progress_every)]
            for flag, value in (("--max-examples", args.max_examples), ("--seed", args.seed),
                                ("--draws-per-compile", args.draws_per_compile),
                                ("--impl", args.impl), ("--plot-dir", args.plot_dir)):
                if value is not None:
                    argv += [flag, str(value)]
            argv += [x for w in args.without for x in ("--without", w)]
            argv += [x for t in args.tolerance for x in ("--tolerance", t)]
            if args.tolerance_scale is not None:
                argv += ["--tolerance-scale", str(args.tolerance_scale)]
            if args.compile_cache is not None:
                argv += ["--compile-cache", str(args.compile_cache)]
            argv += ["--fail-fast"] * args.fail_fast + ["--all-bugs"] * args.all_bugs
            return argv + [x for p in props for x in ("--property", p)]
        return build

    records: list[dict[str, Any]] = []
    for fam in runnable:
        records += watch.supervise_family(
            fam.name, args.property or list(PROPERTIES), child_args=child_args(fam.name),
            timeout=args.timeout, backend=backend.name, impl=args.impl,
            extra_repro=registry.family_module_args(fam.name))
    rows = [[r["family"], r["property"], r["backend"], r["examples"], r.get("checks", "-"),
             r["passed_examples"], r["examples"] - r["passed_examples"], r.get("rejected", "-"),
             f"{r['seconds']:.1f}s",
             r["verdict"] if r["verdict"] != "SKIP" else f"SKIP ({r['reason']})"]
            for r in records]
    rows += [[f.name, "-", backend.name, 0, 0, 0, 0, 0, "-", f"SKIP ({why})"] for f, why in skipped]
    print("\nall families (supervised):")
    print(report.format_table(
        ["family", "property", "backend", "examples", "checks", "passed", "failed",
         "rejected", "time", "verdict"], rows
    ))
    _write_results(args, backend, [], [], skipped, records=records)
    ran = [r for r in records if r["verdict"] != "SKIP"]
    ok = bool(ran) and all(r["verdict"] == "PASS" for r in ran)
    print(f"\n{'PASS' if ok else 'FAIL'}: {sum(r['verdict'] == 'PASS' for r in ran)}/{len(ran)} "
          f"properties passed on backend {backend.name}")
    return 0 if ok else 1


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
    if args.draws_per_compile is None:
        args.draws_per_compile = draws_per_compile(args.profile)
    elif args.draws_per_compile < 1:
        raise UsageError("--draws-per-compile must be at least 1")
    if args.timeout is None and short_name(args.profile) == "nightly":
        args.timeout = 900.0
    if args.plot_dir is not None:
        plot.require_matplotlib()
    if args.timeout is not None and args.timeout < 0:
        raise UsageError("--timeout must be positive (0 turns the limit off)")
    without = parse_features(args.without) | declared_without(impl)
    args.effective_without = without
    families = [
        adjust_tolerances(narrow(f, without), args.tolerance, args.tolerance_scale)
        for f in families
    ]
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
    for fam in runnable:
        for line in describe_adjustments(fam):
            print(f"  {fam.name}: {line}")
    if args.timeout and args.heartbeat_file is None:
        return _run_supervised(args, runnable, skipped, backend)
    outcomes: list[PropertyOutcome] = []
    not_applicable: list[list[Any]] = []
    not_run: list[list[Any]] = []
    for fam in runnable:
        failed_first: str | None = None
        for name in args.property or list(PROPERTIES):
            if args.fail_fast and failed_first is not None:
                why = f"NOT RUN (--fail-fast: {failed_first} failed)"
                not_run.append([fam.name, name, backend.name, 0, 0, 0, 0, 0, "-", why])
                print(f"  {fam.name:<12} {name:<20} {why}", flush=True)
                continue
            observer = Observer()
            watched = watch.instrument(fam, name, heartbeat=args.heartbeat_file, progress=watch.
                                       Progress(fam.name, name, observer, args.progress_every))
            try:
                prop = build_property(
                    name, watched, backend=backend, impl=impl, impl_spec=args.impl,
                    observer=observer, draws_per_compile=args.draws_per_compile)
            except PropertyNotApplicable as e:
                not_applicable.append([fam.name, name, backend.name, 0, 0, 0, 0, 0, "-",
                                       f"SKIP ({e})"])
                watch.emit_record(args.heartbeat_file,
                                  results.skip_record(fam.name, name, backend.name, str(e)))
                print(f"  {fam.name:<12} {name:<20} SKIP (not applicable: {e})", flush=True)
                continue
            outcome = run_property(
                name, watched, prop, backend=backend, observer=observer, profile=profile,
                max_examples=args.max_examples, seed=args.seed,
                shrink_budget=shrink_budget(args.profile), on_first_failure=_first_failure,
                all_bugs=args.all_bugs,
            )
            watch.emit_record(args.heartbeat_file, results.outcome_record(outcome))
            outcomes.append(outcome)
            failed = outcome.observer.last_failure
            if args.plot_dir is not None and not outcome.passed and failed is not None:
                path = args.plot_dir / f"{fam.name}-{name}.png"
                print(f"  picture: {plot.plot_case(fam, failed.case, backend, impl, path)}")
            if not outcome.passed and failed_first is None:
                failed_first = name
            _print_outcome(outcome)
            print(
                f"  {fam.name:<12} {name:<20} {_verdict(outcome)} "
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
        [o.family, o.prop, o.backend.name, o.observer.examples, o.observer.checks,
         o.observer.passed, o.observer.failed, o.observer.rejected, f"{o.wall_seconds:.1f}s",
         _verdict(o)]
        for o in outcomes
    ]
    rows += not_run + _collapse_skips(not_applicable)
    rows += [[f.name, "-", backend.name, 0, 0, 0, 0, 0, "-", f"SKIP ({why})"] for f, why in skipped]
    print()
    print(report.format_table(
        ["family", "property", "backend", "examples", "checks", "passed", "failed",
         "rejected", "time", "verdict"], rows
    ))
    if backend.name == "tpu-interpret":
        print(diagnostics.summary_line())
    for fam in runnable:
        for line in describe_adjustments(fam):
            print(f"{fam.name}: {line}")
    # NOT RUN rows (--fail-fast) go into the results as skips whose reason says so.
    _write_results(args, backend, outcomes, not_applicable + not_run, skipped)
    ok = all(o.passed for o in outcomes) and bool(outcomes)
    print(f"\n{'PASS' if ok else 'FAIL'}: {sum(o.passed for o in outcomes)}/{len(outcomes)} "
          f"properties passed on backend {backend.name}")
    return 0 if ok else 1
