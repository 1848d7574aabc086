"""``kernel-harness golden record|check|add``: stored regression cases."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kernel_harness.cli import common
from kernel_harness.core.backends import Backend
from kernel_harness.core.errors import UsageError
from kernel_harness.records.family import Family
from kernel_harness.records.impl import load_impl
from kernel_harness.regression.golden import (
    SUMMARY_HEADERS,
    GoldenCase,
    GoldenError,
    GoldenOutcome,
    add_case,
    compared_nothing,
    run_family,
    summary_rows,
    writable_root,
)
from kernel_harness.regression.golden.location import resolve
from kernel_harness.run import report
from kernel_harness.run.outputs import ensure_writable

#: Help text of ``--golden-dir`` (golden and gate).
GOLDEN_DIR_HELP = ("the golden root holding FAMILY/ (default: $KERNEL_HARNESS_GOLDEN_DIR, else "
                   "golden-dir in [tool.kernel-harness] of your pyproject.toml, else for a "
                   "built-in family the goldens installed with the harness, else ./golden)")


def add_parser(sub: Any) -> None:
    """Adds ``golden record|check|add`` to the ``kernel-harness`` subparsers."""
    golden = sub.add_parser("golden", help="record or check stored regression cases")
    gsub = golden.add_subparsers(dest="golden_command", required=True)
    for name, text in (("record", "write golden files (missing ones; --force: all chosen)"),
                       ("check", "compare the kernel and reference with the stored goldens")):
        p = gsub.add_parser(name, help=text)
        p.add_argument("family", nargs="*", help="families (default: all)")
        p.add_argument("--case", action="append", default=[], help="only these named cases")
        p.add_argument("--tag", action="append", default=[], help="only cases with a tag")
        common.add_backend_flag(p)
        p.add_argument("--golden-dir", type=Path, default=None, help=GOLDEN_DIR_HELP)
        if name == "record":
            p.add_argument("--force", action="store_true", help="overwrite existing files")
        else:
            p.add_argument("--impl", default=None, help="MODULE:ATTR replacing the kernel")
    add = gsub.add_parser("add", help="pin a case (e.g. one a failure printed) as a golden")
    add.add_argument("family")
    add.add_argument("name")
    add.add_argument("--case", required=True, help="the case as one JSON line")
    add.add_argument("--tag", action="append", default=[])
    add.add_argument("--why", default="", help="which path or bug this case pins")
    common.add_backend_flag(add)
    add.add_argument("--golden-dir", type=Path, default=None, help=GOLDEN_DIR_HELP)


def run(args: Any) -> int:
    """Runs ``kernel-harness golden ...``; exit 0 only if every outcome is ok."""

    backend = common.backend(args.backend)
    root = args.golden_dir
    if args.golden_command == "add":
        (family,) = common.families([args.family])
        _writable(family.name, root)
        try:
            case = family.case_type.from_json(args.case)
            gcase = GoldenCase(name=args.name, case=case, tags=tuple(args.tag), why=args.why)
        except ValueError as e:
            raise UsageError(f"golden add: {e}") from None
        try:
            outcome = add_case(family, gcase, backend, root=root)
        except ValueError as e:
            raise UsageError(f"golden add: {e}") from None
        outcomes = [outcome]
    else:
        families = common.families(args.family)
        impl = load_impl(args.impl) if getattr(args, "impl", None) else None
        if impl is not None and len(families) != 1:
            raise UsageError("--impl replaces one family's kernel: name exactly one family")
        if args.golden_command == "check":
            return check_families(families, backend, impl=impl, root=root, names=args.case,
                                  tags=args.tag)
        outcomes = []
        for family in families:
            _writable(family.name, root)
            _say_where(family.name, root)
            outcomes += run_family(family, backend, mode="record", names=args.case,
                                   tags=args.tag, root=root, force=args.force)
    return summarize(outcomes, args.golden_command, backend)


def check_families(families: Sequence[Family], backend: Backend, *, impl: Any = None,
                   root: Path | None = None, names: Sequence[str] = (),
                   tags: Sequence[str] = ()) -> int:
    """``golden check`` of ``families``: prints where each family's goldens are, the table
    and the verdict line; returns the exit status (0 only if every outcome is ok and some
    golden was compared). ``gate --goldens`` runs it too."""
    outcomes = []
    for family in families:
        _say_where(family.name, root)
        outcomes += run_family(family, backend, mode="check", names=names, tags=tags,
                               impl=impl, root=root)
    return summarize(outcomes, "check", backend)


def _say_where(family: str, root: Path | None) -> None:
    where = resolve(family, root)
    print(f"{family}: goldens in {where.path} ({where.source})")


def summarize(outcomes: Sequence[GoldenOutcome], command: str, backend: Backend) -> int:
    """Prints the outcomes' table and the verdict line of ``golden COMMAND``; returns the exit
    status: 0 only if every outcome is ok (and, for ``check``, some golden was compared)."""
    print(report.format_table(SUMMARY_HEADERS, summary_rows(outcomes)))
    counts = {s: sum(o.status == s for o in outcomes) for s in
              ("PASS", "FAIL", "ERROR", "SKIP", "RECORDED", "KEPT")}
    ok = all(o.ok for o in outcomes)
    nothing = compared_nothing(outcomes) if command == "check" else None
    across = sum(any(n.startswith("versions differ") for n in o.notes) for o in outcomes)
    elsewhere = sum(any(n.startswith("recorded on ") for n in o.notes) for o in outcomes)
    print(f"\n{'PASS' if ok and not nothing else 'FAIL'}: golden {command} on "
          f"backend {backend.name}, jax {jax_version()}: "
          + ", ".join(f"{v} {k.lower()}" for k, v in counts.items() if v)
          + (f" ({across} recorded on another jax version, compared against the family "
             f"tolerances)" if across else "")
          + (f" ({elsewhere} recorded on another backend or device, judged against the "
             f"reference recomputed on {backend.name})" if elsewhere else ""))
    if nothing:
        print(f"  not a pass: {nothing}")
        return 1
    return 0 if ok else 1


def _writable(family: str, root: Path | None) -> None:
    """Before any work: recording ``family`` may not write into the installed package,
    and its golden root must be writable (both a UsageError)."""
    try:
        path = writable_root(family, root)
    except GoldenError as e:
        raise UsageError(f"golden: {e}") from None
    ensure_writable({"--golden-dir": path})


def jax_version() -> str:
    """The installed jax version."""
    import jax

    return jax.__version__
