"""``kernel-harness bench``: time and measure kernels, each configuration checked
against its reference first (see :mod:`kernel_harness.checks.bench`).

Exit 0 when every configuration that ran passed its pre-check and was timed, 1 when
any was FAIL or ERROR, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from kernel_harness.checks import bench_report
from kernel_harness.checks.bench import BenchRow, BenchSettings, bench_family, defaults_for
from kernel_harness.cli import common
from kernel_harness.core.case import DTYPES
from kernel_harness.core.errors import UsageError
from kernel_harness.records.bench import MODES
from kernel_harness.records.impl import load_impl
from kernel_harness.run.outputs import ensure_writable

DTYPE_ALIASES = {"bf16": "bfloat16", "f32": "float32", "fp32": "float32", "f16": "float16",
                 "fp16": "float16", **{d: d for d in DTYPES}}


def add_parser(sub: Any) -> None:
    """Adds ``kernel-harness bench``."""
    p = sub.add_parser("bench", help="time and measure kernels, each checked against its "
                       "reference first")
    p.add_argument("family", nargs="*", help="families (default: all)")
    common.add_backend_flag(p)
    p.add_argument("--seq-lens", default=None,
                   help="comma-separated lengths (default per backend: interpret 256,512)")
    p.add_argument("--dtype", default="bfloat16", help="bf16|f32|f16 or the full name")
    p.add_argument("--mode", default="fwd", help=f"one of {', '.join(MODES)}")
    p.add_argument("--warmup", type=int, default=None, help="untimed calls first")
    p.add_argument("--iters", type=int, default=None, help="timed calls (at most)")
    p.add_argument("--max-seconds", type=float, default=None,
                   help="stop timing a configuration after this many seconds of timed calls")
    p.add_argument("--impl", default=None, help="MODULE:ATTR replacing the family's kernel")
    p.add_argument("--json", default=None, metavar="PATH", help="write the results as JSON")
    p.add_argument("--plot", default=None, metavar="PATH", help="write an SVG plot")


def parse_lengths(text: str) -> tuple[int, ...]:
    """``"1024,2048"`` -> ``(1024, 2048)``, or a :class:`UsageError`."""
    try:
        lengths = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise UsageError(f"--seq-lens must be comma-separated integers, got {text!r}") from None
    if not lengths or min(lengths) < 1:
        raise UsageError(f"--seq-lens must be positive integers, got {text!r}")
    return lengths


def settings_of(args: argparse.Namespace) -> BenchSettings:
    """The run's settings: the arguments over the backend's defaults."""
    backend = common.backend(args.backend)
    if backend.name not in ("interpret", "tpu-interpret", "tpu", "gpu"):
        raise UsageError(f"backend {backend.name!r} has no benchmark defaults")
    lengths, warmup, iters, seconds = defaults_for(backend)
    if args.dtype not in DTYPE_ALIASES:
        raise UsageError(f"unknown dtype {args.dtype!r}; use one of {', '.join(DTYPE_ALIASES)}")
    try:
        return BenchSettings(
            backend=backend,
            seq_lens=parse_lengths(args.seq_lens) if args.seq_lens else lengths,
            dtype=DTYPE_ALIASES[args.dtype], mode=args.mode,
            warmup=warmup if args.warmup is None else args.warmup,
            iters=iters if args.iters is None else args.iters,
            max_seconds=seconds if args.max_seconds is None else args.max_seconds,
        )
    except ValueError as e:
        raise UsageError(str(e)) from None


def _progress(row: BenchRow) -> None:
    where = "" if row.seq_len is None else f" @{row.seq_len}"
    print(f"  .. {row.family}{where}: {row.status}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    """Runs ``kernel-harness bench``."""
    ensure_writable({"--json": args.json, "--plot": args.plot})
    settings = settings_of(args)
    families = common.families(args.family)  # one without a hook is a SKIP row, not dropped
    impl = load_impl(args.impl) if args.impl else None
    if impl is not None and len(families) != 1:
        raise UsageError("--impl replaces one family's kernel: name exactly one family")
    print("\n".join(bench_report.header(settings)), flush=True)
    rows: list[BenchRow] = []
    for fam in families:
        rows += bench_family(fam, settings, impl, args.impl, progress=_progress)
    print()
    print(bench_report.table(rows))
    print()
    print("pre-checks and reasons:")
    print("\n".join(bench_report.details(rows)))
    growth = bench_report.growth_lines(rows)
    if growth:
        print("compiled temporaries, ratio per length step:")
        print("\n".join(growth))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(bench_report.document(settings, rows), f, indent=1)
        print(f"wrote {args.json}")
    if args.plot:
        with open(args.plot, "w") as f:
            f.write(bench_report.svg(settings, rows))
        print(f"wrote {args.plot}")
    bad = [r for r in rows if r.status in ("FAIL", "ERROR")]
    ran = [r for r in rows if r.status != "SKIP"]
    print(f"{len(ran) - len(bad)} configuration(s) checked and timed, {len(bad)} FAIL/ERROR, "
          f"{len(rows) - len(ran)} skipped")
    return 1 if bad else 0
