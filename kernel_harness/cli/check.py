"""``kernel-harness check``: run the properties of families and print a summary table.

Exit 0 only when every property of every family passed, 1 otherwise, 2 on bad input,
3 when SIGTERM, SIGINT or SIGHUP interrupted the run (its results are written, the unit in
progress INTERRUPTED; ``--resume PATH`` continues it; a second signal ends it at once:
:mod:`kernel_harness.orchestration.interrupt`).
"""

from __future__ import annotations

import argparse
import collections
from pathlib import Path
from typing import Any

from kernel_harness.checks.properties import PROPERTIES
from kernel_harness.cli import common, plot
from kernel_harness.orchestration import interrupt, options, results, session_header
from kernel_harness.orchestration.corpus import spill_path_for
from kernel_harness.orchestration.session import CheckRequest, CheckSession, SessionResult
from kernel_harness.run import kernel_coverage, report
from kernel_harness.run.outputs import ensure_writable


def add_parser(sub: Any) -> None:
    """Adds ``kernel-harness check``."""
    check = sub.add_parser("check", help="run the properties of families, print a summary")
    check.add_argument("family", nargs="*", help="families to check (default: all)")
    common.add_profile_flag(check, builtin="dev")
    common.add_backend_flag(check)
    check.add_argument("--max-examples", type=int, default=None)
    check.add_argument("--seed", type=int, default=None)
    check.add_argument("--draws-per-compile", type=int, default=None, metavar="K",
                       help="data draws judged per compiled program (default: the profile's)")
    check.add_argument("--impl", default=None, help="MODULE:ATTR replacing the family's kernel")
    check.add_argument(
        "--property", action="append", metavar="NAME",
        help=f"only these properties ({', '.join(PROPERTIES)}, or an op's relation: describe "
             "FAMILY lists them)"
    )
    check.add_argument("--json", type=Path, default=None, metavar="PATH",
                       help="write machine-readable results (schema: check-results-v1.json)")
    check.add_argument("--junit", type=Path, default=None, metavar="PATH",
                       help="write JUnit XML, one testcase per family x property")
    check.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                       help="per-example limit on the kernel run (a hang is a FAIL and the run "
                       "goes on); runs the units in a worker process; nightly: 900, 0: off")
    check.add_argument("--progress-every", type=float, default=30.0, metavar="SECONDS",
                       help="print progress (examples, rate, failures) at most this often")
    check.add_argument("--plot-dir", type=Path, default=None, metavar="DIR",
                       help="a picture of each failing case: DIR/FAMILY-PROPERTY.png")
    check.add_argument("--isolate", action=argparse.BooleanOptionalAction, default=True,
                       help="run the units in a worker process (default), so that a native "
                       "crash of the kernel (a segfault, an abort) is a CRASH report and the "
                       "run goes on; --no-isolate runs them in this process")
    check.add_argument("--jobs", type=int, default=1, metavar="N",
                       help="run the units in N worker processes side by side (default 1; on "
                       "CPU backends up to one per core pays: each compile uses about one "
                       "core); the summary keeps the units' order")
    common.add_adjustment_flags(check, without=True)
    common.add_compile_cache_flag(check)
    common.add_shrink_budget_flag(check)
    check.add_argument("--all-bugs", action="store_true",
                       help="keep drawing after a property's first failure to report every "
                       "distinct failure and crash kind (slower; default: stop at the first)")
    common.add_corpus_flag(check, text="a failure corpus (DIR, redis://HOST:PORT[/DB], "
                           "github:OWNER/REPO, ro:...): its stored failures replay first, "
                           "whatever --max-examples and --seed say; new failures are stored "
                           "(ci profile: read only)")
    check.add_argument("--corpus-write", action=argparse.BooleanOptionalAction, default=None,
                       help="store new failures in --corpus (default: all profiles but ci)")
    check.add_argument("--require-corpus", action="store_true",
                       help="a --corpus that cannot be reached at the start is an error (exit 2) "
                       "before any work; without it the run goes on, and new failures go to a "
                       "spill file beside --json (`corpus push` delivers them)")
    check.add_argument("--shard", default=None, metavar="I/N",
                       help="run shard I of N of the (family, property) units, with seeds of "
                       "its own (merge the shards' --json with `kernel-harness merge`)")
    check.add_argument("--fail-fast", action="store_true",
                       help="once a family fails a property, list its other properties NOT RUN")
    check.add_argument("--accept-declared", action="store_true", default=False,
                       help="accept what the --impl declares about itself: leave out the "
                       "features it declares it lacks (kernel_harness_without) and pass its "
                       "declared fallback (kernel_harness.fallback); without this only "
                       "--without narrows a check")
    check.add_argument("--resume", type=Path, default=None, metavar="PATH",
                       help="continue an interrupted run: keep the finished units of its "
                       "--json PATH, run the others, merge (give --json PATH to rewrite it)")
    common.add_modes_first_flag(check)
    check.add_argument("--require-modes", action="store_true",
                       help="a declared mode no example reached is an ERROR (default: a "
                       "warning in the verdict line); for a gate")
    check.add_argument("--kernel-coverage", action="store_true",  # docs/kernel-coverage.md
                       help="probe interpreted kernels, print which branches the cases ran")


def request_from_args(args: argparse.Namespace) -> CheckRequest:
    """The session request the flags spell (profile, backend and corpus as resolved from
    the flags and the project's configuration by :func:`common.apply_config`)."""
    return options.check_request(
        args.kh_settings,
        families=tuple(args.family), properties=tuple(args.property or ()), impl=args.impl,
        max_examples=args.max_examples, seed=args.seed,
        draws_per_compile=args.draws_per_compile, without=tuple(args.without),
        config=getattr(args, "kh_config", None),
        tolerance=tuple(args.tolerance), tolerance_scale=args.tolerance_scale,
        timeout=args.timeout,
        isolate=args.isolate, jobs=args.jobs, fail_fast=args.fail_fast, all_bugs=args.all_bugs,
        shrink_budget=args.shrink_budget,
        progress_every=args.progress_every, compile_cache=args.compile_cache,
        corpus_write=args.corpus_write, shard=args.shard, kernel_coverage=args.kernel_coverage,
        resume=None if args.resume is None else str(args.resume),
        accept_declared=args.accept_declared,
        corpus_spill=spill_path_for(args.json, args.junit), corpus_required=args.require_corpus,
        modes_first=args.modes_first, require_modes=args.require_modes,
    )


def _events(result: SessionResult) -> list[str]:
    lines = []
    for fam in result.session.families:
        total: collections.Counter[str] = collections.Counter()
        for r in result.results:
            if r.family == fam.name:
                total.update(r.record.get("events", {}))
        if total:
            lines += [f"\ncases reached by {fam.name} (examples per event):",
                      "  " + ", ".join(f"{k}={v}" for k, v in sorted(total.items()))]
    return lines


def _collapse_skips(rows: list[list[Any]]) -> list[list[Any]]:
    """One summary row per (family, reason) instead of one per skipped property."""
    grouped: dict[tuple[str, str], list[list[Any]]] = {}
    for row in rows:
        grouped.setdefault((row[0], row[-1]), []).append(row)
    out = []
    for (_fam, _reason), group in grouped.items():
        prop = group[0][1] if len(group) == 1 else f"{len(group)} properties"
        out.append([group[0][0], prop, *group[0][2:]])
    return out


HEADERS = ["family", "property", "backend", "examples", "checks", "passed", "failed", "rejected",
           "time", "verdict"]


def summary_table(result: SessionResult) -> str:
    """One row per unit that ran or was left out, SKIP rows collapsed per reason."""
    ran, skips = [], []
    for r in result.results:
        rec = r.record
        if r.verdict == "SKIP":
            skips.append([r.family, r.prop, r.backend, 0, 0, 0, 0, 0, "-",
                          f"SKIP ({rec['reason']})"])
            continue
        failed = rec["examples"] - rec["passed_examples"]
        verdict = (r.label or r.verdict) if r.verdict != "NOT RUN" else rec["reason"]
        ran.append([r.family, r.prop, r.backend, rec["examples"], rec.get("checks", "-"),
                    rec["passed_examples"], failed, rec.get("rejected", "-"),
                    f"{rec['seconds']:.1f}s" if r.ran else "-", verdict])
    return report.format_table(HEADERS, ran + _collapse_skips(skips))


def _write_results(args: argparse.Namespace, result: SessionResult) -> None:
    if args.json is None and args.junit is None:
        return
    results.write_outputs(result.document(), json_path=args.json, junit_path=args.junit)


def _plots(args: argparse.Namespace, result: SessionResult) -> None:
    session = result.session
    by_name = {f.name: f for f in session.families}
    for r in result.results:
        failure = r.record.get("failure")
        if r.verdict != "FAIL" or not failure or failure.get("crash_signal"):
            continue
        fam = by_name[r.family]
        case = fam.case_type.from_json(failure["case_json"])
        path = args.plot_dir / f"{fam.name}-{r.prop}.png"
        print(f"  picture: {plot.plot_case(fam, case, session.backend, session.impl, path)}")


def run(args: argparse.Namespace) -> int:
    """Runs ``kernel-harness check``: a :class:`CheckSession` and its summary."""
    if args.plot_dir is not None:
        plot.require_matplotlib()
    # Before any work: a six-hour nightly must not lose its results at the last second.
    ensure_writable({"--json": args.json, "--junit": args.junit, "--plot-dir": args.plot_dir,
                     "--compile-cache": args.compile_cache})
    session = CheckSession(request_from_args(args))
    with interrupt.handling():
        result = session.run()
    if args.plot_dir is not None:
        _plots(args, result)
    for line in _events(result) + kernel_coverage.family_tables(result.coverage,
                                                                session.families):
        print(line)
    print()
    print(summary_table(result))
    for line in result.notes + result.corpus_lines():
        print(line)
    for fam in session.families:
        for line in session_header.adjustment_lines(session, fam):
            print(f"{fam.name}: {line}")
    _write_results(args, result)
    print(f"\n{result.final_line()}")
    if result.interrupted is not None:
        stopped = [r for r in result.results if r.verdict == "INTERRUPTED"]
        again = f"; `--resume {args.json}` continues it" if args.json else ""
        print(f"INTERRUPTED by {result.interrupted}: {len(result.ran) - len(stopped)} units "
              f"finished, {len(stopped)} interrupted, {len(result.not_started)} not started; "
              f"results written{again} (exit {interrupt.EXIT_INTERRUPTED})")
        return interrupt.EXIT_INTERRUPTED
    return 0 if result.ok else 1
