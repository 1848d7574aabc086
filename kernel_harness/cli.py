"""The ``kernel-harness`` command line: list, check, repro, select.

Bad input (unknown family, backend or profile; an ``--impl`` that does not
import or is not callable; a backend not available here) prints one line on
stderr and exits 2, without a traceback. ``check`` exits 0 only when every
property of every family passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import jax

from kernel_harness import (
    bad_input,
    diagnostics,
    gate,
    golden,
    lowering,
    mutate,
    report,
    sharding,
)
from kernel_harness.backends import BACKEND_NAMES, BackendUnavailable, availability, resolve_backend
from kernel_harness.family import Family, UnknownFamily, family_names, get_family
from kernel_harness.metamorphic import PropertyNotApplicable
from kernel_harness.profiles import PROFILE_NAMES, get_profile
from kernel_harness.properties import PROPERTIES, Observer, PropertyOutcome, run_property
from kernel_harness.runner import check_case, ensure_supported


class UsageError(Exception):
    """Bad command-line input: reported as one line on stderr, exit code 2."""


def load_impl(spec: str) -> Callable[..., Any]:
    """Imports ``MODULE:ATTR`` (the working directory is importable) and returns the
    callable, or raises :class:`UsageError`."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise UsageError(f"--impl must look like MODULE:ATTR, got {spec!r}")
    if os.getcwd() not in sys.path:  # like `python -m`: the author's working tree is importable
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # noqa: BLE001 - any import failure is the user's to see
        raise UsageError(f"--impl {spec}: cannot import {module_name!r}: {e}") from None
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UsageError(f"--impl {spec}: module {module_name!r} has no {attr!r}") from None
    if not callable(obj):
        raise UsageError(f"--impl {spec}: {attr!r} is a {type(obj).__name__}, not callable")
    return obj


def _families(names: Sequence[str]) -> list[Family]:
    try:
        return [get_family(n) for n in (names or family_names())]
    except UnknownFamily as e:
        raise UsageError(str(e)) from None


def _profile(name: str) -> Any:
    try:
        return get_profile(name)
    except ValueError as e:
        raise UsageError(str(e)) from None


def _backend(name: str):
    try:
        return resolve_backend(name)
    except (ValueError, BackendUnavailable) as e:
        raise UsageError(str(e)) from None


def cmd_list(args: argparse.Namespace) -> int:
    avail = availability()
    rows = [
        [f.name, ", ".join(sorted(f.backends)), ", ".join(sorted(f.capabilities))]
        for f in _families([])
    ]
    print(report.format_table(["family", "backends", "capabilities"], rows))
    print()
    rows = [[b, "yes" if r is None else f"no: {r}"] for b, r in avail.items()]
    rows.append(["auto", f"-> {resolve_backend('auto').name}"])
    print(report.format_table(["backend", "available here"], rows))
    return 0


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


def cmd_check(args: argparse.Namespace) -> int:
    families = _families(args.family)
    profile = _profile(args.profile)
    backend = _backend(args.backend)
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
    outcomes: list[PropertyOutcome] = []
    not_applicable: list[list[Any]] = []
    for fam in runnable:
        for name in args.property or list(PROPERTIES):
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
            )
            outcomes.append(outcome)
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
    rows += _collapse_skips(not_applicable)
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


def cmd_repro(args: argparse.Namespace) -> int:
    (fam,) = _families([args.family])
    backend = _backend(args.backend)
    impl = load_impl(args.impl) if args.impl else None
    try:
        case = fam.case_type.from_json(args.case)
    except ValueError as e:
        raise UsageError(f"--case: {e}") from None
    try:
        ensure_supported(fam, backend)
    except BackendUnavailable as e:
        raise UsageError(str(e)) from None
    result = check_case(fam, case, backend, impl, impl_spec=args.impl)
    if result.passed:
        print(f"PASS {fam.name} on {backend.name}: {case!r}")
        print(report.stats_table(result.verdicts))
        return 0
    print(report.failure_report(result))
    return 1


def cmd_select(args: argparse.Namespace) -> int:
    from kernel_harness.select import format_selection, select_attention

    try:
        selection = select_attention(args.backend)
    except (ValueError, BackendUnavailable, RuntimeError) as e:
        raise UsageError(str(e)) from None
    print(format_selection(selection))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``kernel-harness``."""
    parser = argparse.ArgumentParser(prog="kernel-harness", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="families, their capabilities, backends available here")

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

    repro = sub.add_parser("repro", help="rerun one case printed by a failure")
    repro.add_argument("family")
    repro.add_argument("--case", required=True, help="the case as one JSON line")
    repro.add_argument("--backend", default="interpret")
    repro.add_argument("--impl", default=None)
    select = sub.add_parser("select", help="which attention kernel this backend would use, and why")
    select.add_argument("--backend", default=None, help="a backend name (default: this machine)")
    golden.add_cli(sub)
    gate.add_cli(sub)
    mutate.add_cli(sub)
    lowering.add_cli(sub)
    bad_input.add_cli(sub)
    sharding.add_cli(sub)
    return parser


COMMANDS = {"list": cmd_list, "select": cmd_select, "check": cmd_check, "repro": cmd_repro,
            "golden": golden.cmd_golden, "gate": gate.cmd_gate, "mutate": mutate.cmd_mutate,
            "lower": lowering.cmd_lower,
            "bad-input": bad_input.cmd_bad_input, "shard": sharding.cmd_shard}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``kernel-harness`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except UsageError as e:
        print(f"kernel-harness: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
