"""``kernel-harness shard``: the kernels under shard_map on a simulated 4-device CPU mesh."""

from __future__ import annotations

from typing import Any

from kernel_harness.checks.sharding import run_in_subprocess


def add_parser(sub: Any) -> None:
    """Adds ``kernel-harness shard`` to the subparsers."""
    p = sub.add_parser("shard", help="run kernels under shard_map on a 4-device CPU mesh")
    p.add_argument("family", nargs="+")
    p.add_argument("--examples", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)


def run(args: Any) -> int:
    """Runs the sharding check in a subprocess and prints its report."""
    code, output = run_in_subprocess(args.family, examples=args.examples, seed=args.seed)
    print(output.rstrip())
    return code
