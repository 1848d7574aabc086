"""The ``kernel-harness`` command line: the leaf of the package (nothing imports it).

One module per subcommand, each with ``add_parser`` and ``run``. Bad input
(unknown family, backend or profile; an ``--impl`` that does not import or is
not callable; a backend not available here) prints one line on stderr and exits
2, without a traceback. ``check`` exits 0 only when every property of every
family passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from kernel_harness.cli import (
    bad_input,
    check,
    export_repro,
    gate,
    golden,
    listing,
    lower,
    mutate,
    repro,
    shard,
)
from kernel_harness.core.errors import UsageError


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``kernel-harness``."""
    parser = argparse.ArgumentParser(
        prog="kernel-harness", description="A correctness harness for JAX Pallas kernels."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    listing.add_parsers(sub)
    for module in (check, repro, export_repro, golden, gate, mutate, lower, bad_input, shard):
        module.add_parser(sub)
    return parser


COMMANDS = {"list": listing.run_list, "select": listing.run_select, "check": check.run,
            "repro": repro.run, "export-repro": export_repro.run,
            "golden": golden.run, "gate": gate.run, "mutate": mutate.run,
            "lower": lower.run, "bad-input": bad_input.run, "shard": shard.run}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``kernel-harness`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except UsageError as e:
        print(f"kernel-harness: error: {e}", file=sys.stderr)
        return 2


