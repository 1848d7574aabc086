"""``kernel-harness mutate``: plant the catalog's bugs in a kernel; every one must be caught."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from kernel_harness.checks.properties import properties_of
from kernel_harness.cli import common
from kernel_harness.cli.golden import GOLDEN_DIR_HELP
from kernel_harness.core.errors import UsageError
from kernel_harness.regression.mutate import (
    DEFAULT_MAX_EXAMPLES,
    GATE_COLUMN,
    GOLDEN_COLUMN,
    MutantResult,
    catalog_impl,
    compared_nothing,
    kill_matrix,
    load_catalog,
    run_many,
    run_one,
)


def add_parser(sub: Any) -> None:
    """Adds ``mutate`` to the ``kernel-harness`` subparsers."""
    p = sub.add_parser("mutate", help="plant the catalog's bugs in a kernel; all must be caught")
    p.add_argument("family")
    p.add_argument("--mutant", action="append", default=[], help="only these mutants")
    p.add_argument("--tag", action="append", default=[], help="only mutants with a tag (ci)")
    p.add_argument("--list", action="store_true", help="list the catalog and exit")
    p.add_argument("--max-examples", type=int, default=DEFAULT_MAX_EXAMPLES)
    common.add_profile_flag(p, builtin="ci")
    common.add_backend_flag(p)
    p.add_argument("--property", action="append", default=None, help="only these properties")
    p.add_argument("--no-golden", action="store_true",
                   help="leave out the golden and gate columns")
    p.add_argument("--golden-dir", type=Path, default=None, help=GOLDEN_DIR_HELP)
    p.add_argument("--catalog", default=None, help="MODULE:ATTR of the mutant list")
    p.add_argument("--timeout", type=float, default=900, help="seconds per mutant")
    p.add_argument("--example-timeout", type=float, default=None, metavar="SECONDS",
                   help="per-example limit on the kernel run: a run past it kills the mutant "
                   "as a hang (default: check's, 300 for a collective family, else none; "
                   "0: off)")
    p.add_argument("--skip-control", action="store_true",
                   help="do not first check that the unmutated kernel passes")
    p.add_argument("--draws-per-compile", type=int, default=1, metavar="K",
                   help="data draws judged per compiled program by matches-reference")
    p.add_argument("--first-kill", action="store_true",
                   help="stop a mutant's properties at the first one that kills it (faster)")
    p.add_argument("--seeds", default=None, metavar="S",
                   help="run seeds, as check --seed takes one: 3, 0-9 or 1,4,7; several give "
                   "each mutant's kill rate over them (default: the derandomized run)")
    common.add_modes_first_flag(p)


def parse_seeds(text: str | None) -> list[int | None]:
    """``--seeds``: ``3``, ``0-9`` (inclusive) or ``1,4,7``; None: one derandomized run."""
    if text is None:
        return [None]
    parts = [re.fullmatch(r"(\d+)(?:-(\d+))?", part.strip()) for part in text.split(",")]
    if not all(parts) or any(p[2] and int(p[2]) < int(p[1]) for p in parts if p):
        raise UsageError(f"--seeds takes 3, 0-9 or 1,4,7 (non-negative, low-high), not {text!r}")
    seeds = [s for p in parts if p for s in range(int(p[1]), int(p[2] or p[1]) + 1)]
    return list(dict.fromkeys(seeds))


def run(args: Any) -> int:
    """Runs ``kernel-harness mutate``: 0 only if every chosen mutant is killed."""

    (family,) = common.families([args.family])
    common.backend(args.backend)
    common.profile(args.profile)
    try:
        catalog = load_catalog(family.name, args.catalog)
    except ValueError as e:
        raise UsageError(str(e)) from None
    unknown = sorted(set(args.mutant) - {m.name for m in catalog})
    if unknown:
        raise UsageError(f"no mutant(s) {unknown} in the {family.name} catalog")
    chosen = [m for m in catalog if (not args.mutant or m.name in args.mutant)
              and (not args.tag or set(args.tag) & set(m.tags))]
    if args.list:
        for m in catalog:
            print(f"{m.name:<28} [{','.join(m.tags)}] {m.module}: {m.description}")
        return 0
    if not chosen:
        raise UsageError("no mutants selected")
    if args.max_examples < 1:
        raise UsageError("--max-examples must be at least 1")
    if args.draws_per_compile < 1:
        raise UsageError("--draws-per-compile must be at least 1")
    known = properties_of(family)
    props = args.property or list(known)
    bad = sorted(set(props) - set(known))
    if bad:
        raise UsageError(f"unknown properties {bad}; known for {family.name}: {list(known)}")
    seeds = parse_seeds(args.seeds)
    kw = dict(properties=props, backend=args.backend, profile=args.profile,
              max_examples=args.max_examples, golden=not args.no_golden,
              golden_root=args.golden_dir, timeout=args.timeout,
              draws_per_compile=args.draws_per_compile, modes_first=args.modes_first,
              catalog=args.catalog, example_timeout=args.example_timeout)
    columns = props + ([] if args.no_golden else [GOLDEN_COLUMN, GATE_COLUMN])
    print(f"kernel-harness mutate {family.name}: {len(chosen)} mutants, backend {args.backend}, "
          f"profile {args.profile}, at most {args.max_examples} examples per property, "
          f"no shrinking"
          + ("" if seeds == [None] else f", seeds {','.join(map(str, seeds))}")
          + (f"; planted in {impl} (run in place of the family's kernel)"
             if (impl := catalog_impl(family.name, args.catalog)) else ""), flush=True)
    for bug in args.config.known_bugs:  # left out of every run, as check leaves them out
        if bug["family"] == family.name:
            print(f"  checked without: {', '.join(bug['without'])} (known bug: {bug['reason']}"
                  + (f" ({bug['link']})" if bug.get("link") else "") + ")", flush=True)
    if len(seeds) > 1:
        return _kill_rates(family.name, chosen, seeds, args, kw)
    return _one_run(family.name, chosen, args, dict(kw, seed=seeds[0]), columns)


def _print_control_failure(name: str, control: MutantResult, backend: str) -> None:
    """What failed the unmutated kernel, per property, with the command that replays it."""
    for prop, col in control.columns.items():
        if not col.get("killed"):
            continue
        print(f"    control {prop}: {col.get('how', '?')} (example {col.get('examples', '?')})")
        if "case" in col:
            draws = "" if prop == "matches-reference" else " --draws ...  # as check prints it"
            print(f"      replay: kernel-harness repro {name} --backend {backend} "
                  f"--property {prop} --case '{col['case']}'{draws}")


def _one_run(name: str, chosen: list[Any], args: Any, kw: dict[str, Any],
             columns: list[str]) -> int:
    kw_mutants = dict(kw, first_kill=args.first_kill)
    results = []
    if not args.skip_control:
        control = run_one(name, None, **kw)
        results.append(control)
        print(f"  control (no mutant): {control.status} ({control.wall_s:.0f}s) {control.error}",
              flush=True)
        if control.status != "PASS":
            print(kill_matrix(results, columns))
            _print_control_failure(name, control, args.backend)
            print("\nFAIL: the unmutated kernel does not pass; kills would mean nothing")
            return 1
        empty = compared_nothing(control)
        if empty:
            print(kill_matrix(results, columns))
            print("\nFAIL: compared nothing in the control run: " + "; ".join(empty)
                  + " (record what is missing, or pass --no-golden)")
            return 1
    def progress(r: MutantResult) -> None:
        print(f"  {r.mutant:<28} {r.status:<9} ({r.wall_s:.0f}s) {r.error}", flush=True)

    results += run_many(name, chosen, on_result=progress, **kw_mutants)
    print()
    print(kill_matrix(results, columns))
    print()
    by_name = {r.mutant: r for r in results}
    for m in chosen:
        r = by_name[m.name]
        kills = [(name, c.get("how", "")) for name, c in r.columns.items() if c.get("killed")]
        first = f"killed by {kills[0][0]}: {kills[0][1]}" if kills else r.error or "-"
        print(f"  {m.name}: {m.description}\n      {first}")
    mutants = [r for r in results if r.mutant is not None]
    killed = sum(r.status == "KILLED" for r in mutants)
    errors = [r for r in mutants if r.status == "ERROR"]
    survivors = [r.mutant for r in mutants if r.status == "SURVIVED"]
    ok = killed == len(mutants)
    print(f"\n{'PASS' if ok else 'FAIL'}: {name}: {killed}/{len(mutants)} mutants killed"
          + (f"; survived: {survivors}" if survivors else "")
          + (f"; {len(errors)} ERROR (stale or broken catalog entries)" if errors else ""))
    return 0 if ok else 1


def _kill_rates(name: str, chosen: list[Any], seeds: list[int | None], args: Any,
                kw: dict[str, Any]) -> int:
    """Each mutant on every seed (the control first on each, unless skipped): how many of
    the seeds' runs kill it. 0 only if every mutant dies on every seed."""
    kills: dict[str, list[int | None]] = {m.name: [] for m in chosen}
    errors: dict[str, list[str]] = {m.name: [] for m in chosen}
    unmeasured: list[int | None] = []
    for s in seeds:
        # The control and the mutants of one seed share one child process (one jax import).
        runs = run_many(name, ([] if args.skip_control else [None]) + list(chosen), **kw,
                        seed=s, first_kill=args.first_kill)
        if not args.skip_control:
            control, runs = runs[0], runs[1:]
            print(f"  seed {s}: control (no mutant): {control.status} ({control.wall_s:.0f}s) "
                  f"{control.error}", flush=True)
            if control.status != "PASS":  # kills on this seed would mean nothing
                _print_control_failure(name, control, args.backend)
                unmeasured.append(s)
                continue
        for r in runs:
            print(f"  seed {s}: {r.mutant:<28} {r.status:<9} ({r.wall_s:.0f}s) {r.error}",
                  flush=True)
            if r.status == "KILLED":
                kills[r.mutant].append(s)
            elif r.status == "ERROR":
                errors[r.mutant].append(f"seed {s}: {r.error}")
    print()
    if unmeasured:
        print(f"  the unmutated kernel did not pass on seeds {unmeasured}: not measured there")
    measured = [s for s in seeds if s not in unmeasured]
    for m in chosen:
        survived = [s for s in measured if s not in kills[m.name]]
        print(f"  {m.name:<28} killed on {len(kills[m.name])}/{len(measured)} seeds"
              + (f"; not on {survived}" if survived else "")
              + (f"; {len(errors[m.name])} ERROR" if errors[m.name] else ""))
    ok = not unmeasured and all(len(k) == len(seeds) for k in kills.values())
    print(f"\nPASS: {name}: every mutant killed on every seed" if ok
          else f"\nFAIL: {name}: some mutant survived a seed (or errored)")
    return 0 if ok else 1
