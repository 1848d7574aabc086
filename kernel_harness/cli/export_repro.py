"""``kernel-harness export-repro``: one case as a standalone script (no harness needed)."""

from __future__ import annotations

import argparse
from typing import Any

from kernel_harness.cli import common
from kernel_harness.core.errors import UsageError
from kernel_harness.records.narrow import adjust_tolerances
from kernel_harness.regression.export import ExportError, build_case, export_repro
from kernel_harness.run.outputs import ensure_writable


def add_parser(sub: Any) -> None:
    """Adds ``kernel-harness export-repro``."""
    p = sub.add_parser(
        "export-repro",
        help="write one case as a standalone script (+ .npz) needing only jax, numpy and "
        "the kernel's package",
    )
    p.add_argument("family")
    p.add_argument("--case", required=True, help="the case as one JSON line")
    p.add_argument("--impl", default=None, help="MODULE:ATTR the script imports as the kernel")
    common.add_backend_flag(p)
    common.add_adjustment_flags(p, without=False)
    p.add_argument("--out", required=True, help="PATH.py; the inputs go to PATH.npz")
    p.add_argument(
        "--outside-contract", action="store_true",
        help="skip the case's validity checks (a configuration the strategy never draws "
        "because the kernel mishandles it: for findings)",
    )


def run(args: argparse.Namespace) -> int:
    """Runs ``kernel-harness export-repro``: 0 written, 2 bad input."""
    ensure_writable({"--out": args.out})
    (fam,) = common.families([args.family])
    # the check's --tolerance flags travel with its export line: the script judges alike
    fam = adjust_tolerances(fam, args.tolerance, args.tolerance_scale)
    if fam.export is None:
        raise UsageError(f"family {fam.name!r} has no export hook (Family.export)")
    try:
        case = build_case(fam, args.case, outside_contract=args.outside_contract)
        script, npz = export_repro(fam, case, args.out, backend=args.backend,
                                   impl_spec=args.impl)
    except ExportError as e:
        raise UsageError(str(e)) from None
    except ValueError as e:
        raise UsageError(f"--case: {e}") from None
    print(f"wrote {script} and {npz}; run: python {script}")
    return 0
