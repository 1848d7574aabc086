"""``kernel-harness mutate``: plant the catalog's bugs in a kernel; every one must be caught."""

from __future__ import annotations

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
    p.add_argument("--skip-control", action="store_true",
                   help="do not first check that the unmutated kernel passes")
    p.add_argument("--draws-per-compile", type=int, default=1, metavar="K",
                   help="data draws judged per compiled program by matches-reference")
    p.add_argument("--first-kill", action="store_true",
                   help="stop a mutant's properties at the first one that kills it (faster)")


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
    kw = dict(properties=props, backend=args.backend, profile=args.profile,
              max_examples=args.max_examples, golden=not args.no_golden,
              golden_root=args.golden_dir, timeout=args.timeout,
              draws_per_compile=args.draws_per_compile)
    kw_mutants = dict(kw, first_kill=args.first_kill)
    columns = props + ([] if args.no_golden else [GOLDEN_COLUMN, GATE_COLUMN])
    print(f"kernel-harness mutate {family.name}: {len(chosen)} mutants, backend {args.backend}, "
          f"profile {args.profile}, at most {args.max_examples} examples per property, "
          f"no shrinking", flush=True)
    results = []
    if not args.skip_control:
        control = run_one(family.name, None, **kw)
        results.append(control)
        print(f"  control (no mutant): {control.status} ({control.wall_s:.0f}s) {control.error}",
              flush=True)
        if control.status != "PASS":
            print(kill_matrix(results, columns))
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

    results += run_many(family.name, chosen, on_result=progress, **kw_mutants)
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
    print(f"\n{'PASS' if ok else 'FAIL'}: {family.name}: {killed}/{len(mutants)} mutants killed"
          + (f"; survived: {survivors}" if survivors else "")
          + (f"; {len(errors)} ERROR (stale or broken catalog entries)" if errors else ""))
    return 0 if ok else 1
