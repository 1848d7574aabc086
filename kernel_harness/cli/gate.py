"""``kernel-harness gate``: fail if a kernel change made any golden case less accurate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernel_harness.cli import common
from kernel_harness.cli.golden import GOLDEN_DIR_HELP, check_families
from kernel_harness.core.errors import UsageError
from kernel_harness.orchestration import options
from kernel_harness.orchestration.corpus import open_corpus
from kernel_harness.orchestration.session import CheckSession
from kernel_harness.records.impl import load_impl
from kernel_harness.regression import golden
from kernel_harness.regression.gate import (
    DEFAULT_FACTOR,
    DEFAULT_FLOOR,
    GateError,
    Row,
    baseline_sections,
    default_path,
    evaluate,
    measure,
    record,
    section_key,
    table,
)
from kernel_harness.run import compile_cache
from kernel_harness.run.crash import KernelCrash
from kernel_harness.run.outputs import ensure_writable
from kernel_harness.run.runner import ensure_supported, impl_name


def add_parser(sub: Any) -> None:
    """Adds ``gate`` to the ``kernel-harness`` subparsers."""
    p = sub.add_parser("gate", help="fail if a kernel change made any golden case less accurate")
    p.add_argument("family", nargs="*", help="families (default: all)")
    p.add_argument("--baseline", type=Path, default=None,
                   help="baseline JSON (default <golden root>/<family>/baseline.json)")
    p.add_argument("--impl", default=None, help="MODULE:ATTR: the candidate kernel")
    p.add_argument("--factor", type=float, default=DEFAULT_FACTOR,
                   help=f"allowed error growth (default {DEFAULT_FACTOR})")
    p.add_argument("--floor", type=float, default=DEFAULT_FLOOR,
                   help=f"errors below this count as this (default {DEFAULT_FLOOR})")
    p.add_argument("--record", action="store_true", help="write the baseline instead")
    common.add_backend_flag(p)
    p.add_argument("--golden-dir", type=Path, default=None, help=GOLDEN_DIR_HELP)
    p.add_argument("--across-versions", action="store_true",
                   help="with no baseline of this jax version, gate against the nearest other "
                        "version's (its table is always printed as a version-drift warning)")
    common.add_compile_cache_flag(p)
    p.add_argument("--fail-fast", action="store_true",
                   help="stop at the first family that fails; list the rest NOT RUN")
    common.add_corpus_flag(p, text="a failure corpus (what the nightly found): each gated "
                           "family's stored failures are replayed too, and one that fails again "
                           "fails the gate")
    p.add_argument("--goldens", action="store_true",
                   help="first run `golden check` on the same families, backend, --impl and "
                   "--golden-dir, in this process (the gate then reuses the programs it "
                   "traced and compiled: both for about the price of one); either failing "
                   "fails the gate")


def run(args: Any) -> int:
    """Runs ``kernel-harness gate``: 0 pass, 1 a case got worse or fails, 2 no usable baseline."""

    ensure_writable({"--compile-cache": args.compile_cache,
                     "--baseline": args.baseline if args.record else None})
    print(f"kernel-harness gate: {compile_cache.enable(args.compile_cache)}")
    families = common.families(args.family)
    backend = common.backend(args.backend)
    impl = load_impl(args.impl) if args.impl else None
    if (impl is not None or args.baseline is not None) and len(families) != 1:
        raise UsageError("--impl and --baseline apply to one family: name exactly one")
    if not args.factor > 1 or not args.floor > 0:
        raise UsageError("--factor must be > 1 and --floor > 0")
    if args.goldens and args.record:
        raise UsageError("--goldens checks the golden files and --record writes the baseline: "
                         "run them one at a time")
    if args.corpus:  # a corpus that cannot be opened is a usage error, before any work
        open_corpus(args.corpus, writable=False)
    worst = 0
    failed_family: str | None = None
    if args.family:  # a named family the backend cannot run is a usage error, before any work
        for family in families:
            _ensure_supported_or_usage_error(family, backend)
    if args.goldens:
        worst = check_families(families, backend, impl=impl, root=args.golden_dir)
        print()
        if worst and args.fail_fast:
            print("kernel-harness gate: NOT RUN (--fail-fast: the golden check failed)")
            return worst
    for family in families:
        if args.fail_fast and failed_family is not None:
            print(f"{family.name}: NOT RUN (--fail-fast: {failed_family} failed the gate)")
            continue
        path = args.baseline or default_path(family.name, args.golden_dir)
        try:
            ensure_supported(family, backend)
        except Exception as e:  # noqa: BLE001 - BackendUnavailable: skipped with the reason
            print(f"{family.name}: SKIP ({e})")
            continue
        if args.corpus and not args.record and _corpus_fails(args, family):
            worst = max(worst, 1)
            failed_family = failed_family or family.name
        try:
            if args.record:
                data = record(family, backend, path=path, impl=impl, root=args.golden_dir)
                env = golden.environment(backend)
                n = len(data["sections"][section_key(env)]["cases"])
                print(f"{family.name}: recorded the {backend.name} baseline of {n} cases "
                      f"on jax {env['jax_version']} in {path}")
                continue
            same, other = baseline_sections(family, backend, path)
            cases = golden.load_manifest(family, args.golden_dir)
            measured = measure(family, backend, cases, impl, impl_spec=args.impl)
            here = golden.environment(backend)["jax_version"]
            drift = None
            if other is not None and (same is None or golden.version_key(
                    other["environment"]["jax_version"]) < golden.version_key(here)):
                drift = evaluate(other["cases"], measured, cases, factor=args.factor,
                                 floor=args.floor)
            section = same if same is not None else other if args.across_versions else None
            rows = None if section is None else evaluate(
                section["cases"], measured, cases, factor=args.factor, floor=args.floor)
        except (GateError, golden.GoldenError) as e:
            print(f"kernel-harness gate: {family.name}: {e}")
            worst = max(worst, 2)
            continue
        except KernelCrash as e:  # the CRASH report, no traceback: the gate fails
            print(f"kernel-harness gate: {family.name}: the kernel crashed on a golden case\n{e}")
            worst = max(worst, 1)
            failed_family = failed_family or family.name
            continue
        if drift is not None:
            print_drift(family.name, other, here, drift, args.factor)
        if rows is None:
            print(f"kernel-harness gate: {family.name}: no baseline recorded on jax {here} for "
                  f"backend {backend.name}, so no gate verdict (the table above is the drift "
                  f"from jax {other['environment']['jax_version']}); after reviewing it, record "
                  f"one with `kernel-harness gate {family.name} --record --backend "
                  f"{backend.name}`")
            worst = max(worst, 1 if any(r.verdict == "FAIL" for r in drift or ()) else 2)
            continue
        failed = [r for r in rows if r.failed]
        print(f"\n{family.name} on {backend.name}, jax {section['environment']['jax_version']}: "
              f"candidate "
              f"{impl_name(family.kernel if impl is None else impl)} vs baseline of "
              f"{section['impl']} (limit = {args.factor:g} x max(before, {args.floor:g}))")
        print(table(rows))
        verdict = "FAIL" if failed else "PASS"
        print(f"{verdict}: {family.name}: {len(failed)} of {len(rows)} (case, output) pairs "
              f"worse than allowed or failing")
        if any(r.verdict == "better" for r in rows) and not failed:
            print(f"  some errors shrank by more than {args.factor:g}x: consider --record")
        worst = max(worst, 1 if failed else 0)
        if failed and failed_family is None:
            failed_family = family.name
    return worst


def _ensure_supported_or_usage_error(family: Any, backend: Any) -> None:
    """A family named on the command line that the backend cannot run is a usage error."""
    try:
        ensure_supported(family, backend)
    except Exception as e:  # noqa: BLE001 - BackendUnavailable
        raise UsageError(str(e)) from None


def _corpus_fails(args: Any, family: Any) -> bool:
    """Replays the family's stored corpus entries (read only) through a check session of
    that family alone, as ``check`` replays them; True when one fails again."""
    session = CheckSession(options.check_request(
        {**args.kh_settings, "profile": options.Setting("ci", "default")},
        config=getattr(args, "kh_config", None), families=(family.name,), impl=args.impl,
        corpus_write=False, corpus_required=True, compile_cache=args.compile_cache))
    replays = session.replay_stored(session.families[0])
    if session.corpus.lost is not None:  # what the nightly found must reach the gate
        raise UsageError(f"gate: corpus {session.corpus.location} stopped answering "
                         f"({session.corpus.lost.reason}); the gate cannot replay it")
    if not replays:
        print(f"{family.name}: corpus {session.corpus.location}: no stored failure of this "
              "family")
        return False
    print(f"\n{family.name}: {len(replays)} stored failure(s) replayed from corpus "
          f"{session.corpus.location}")
    for r in replays:
        print(f"  {r.line()}")
        if r.failed:
            print(r.report)
    failed = [r for r in replays if r.failed]
    print(f"{'FAIL' if failed else 'PASS'}: {family.name}: {len(failed)} of {len(replays)} "
          "stored failures fail again")
    return bool(failed)


def print_drift(family: str, other: dict[str, Any], here: str, rows: list[Row],
                factor: float) -> None:
    """The before/after table against another jax version's baseline, as a warning section:
    news of an upgrade, not the gate's verdict (that needs this version's baseline)."""
    then = other["environment"]["jax_version"]
    print(f"\nWARNING: version drift: {family} on jax {here} vs the baseline recorded on jax "
          f"{then} (a warning, not the gate verdict)")
    print(table(rows))
    moved = [f"{r.case}/{r.output} {r.before or 0:.3g} -> {r.after:.3g}" for r in rows
             if r.verdict in ("WORSE", "FAIL")]
    if moved:
        print(f"WARNING: {family}: {len(moved)} (case, output) pair(s) worse than {factor:g}x "
              f"the jax {then} baseline or failing since the upgrade: {'; '.join(moved)}")
    else:
        print(f"  {family}: no (case, output) pair moved beyond {factor:g}x since jax {then}")
