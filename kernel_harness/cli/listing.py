"""``kernel-harness list`` (families and backends here) and ``kernel-harness select``
(which attention kernel a backend would use, and why not the others)."""

from __future__ import annotations

import argparse
from typing import Any

from kernel_harness.checks import bench_report
from kernel_harness.checks.bench import BenchSettings, bench_family, check_chosen, defaults_for
from kernel_harness.cli import common
from kernel_harness.core.backends import BackendUnavailable, availability, resolve_backend
from kernel_harness.core.errors import UsageError
from kernel_harness.records import registry
from kernel_harness.run import report
from kernel_harness.run.select import CANDIDATES, format_selection, select_attention


def add_parsers(sub: Any) -> None:
    """Adds ``kernel-harness list`` and ``kernel-harness select``."""
    sub.add_parser("list", help="families, their capabilities, backends available here")
    select = sub.add_parser("select", help="which attention kernel this backend would use, and "
                            "why; the chosen one is run once, checked and its kernels counted")
    select.add_argument("--backend", default=None, help="a backend name (default: this machine)")
    select.add_argument("--bench", action="store_true",
                        help="measure every candidate (checked first) beside its reason")
    select.add_argument("--seq-len", type=int, default=None, help="length for --bench")


def run_list(args: argparse.Namespace) -> int:
    """Runs ``kernel-harness list``: a family whose module does not import is listed with
    its error (exit 0: the others are usable)."""
    avail = availability()
    families, broken = registry.importable_families()
    rows = [
        [f.name, ", ".join(sorted(f.backends)) or f"- (needs {f.requires or 'a backend'})",
         ", ".join(sorted(f.capabilities))]
        for f in families
    ]
    rows += [[name, "-", "DOES NOT IMPORT (below)"] for name in broken]
    print(report.format_table(["family", "backends", "capabilities"], rows))
    if broken:
        print("\nfamilies that do not import (check or describe of one exits 2 with this "
              "error; fix or uninstall its package):")
        for name, why in broken.items():
            print(f"  {name}: {why}")
    print("\nimplementation signatures (--impl; `kernel-harness describe FAMILY` for the "
          "contract, tolerances and optional features):")
    for f in families:
        print(f"  {f.name}: {f.impl_signature}")
    print()
    rows = [[b, "yes" if r is None else f"no: {r}"] for b, r in avail.items()]
    rows.append(["auto", f"-> {resolve_backend('auto').name}"])
    print(report.format_table(["backend", "available here"], rows))
    return 0


def run_select(args: argparse.Namespace) -> int:
    """Runs ``kernel-harness select``."""
    try:
        selection = select_attention(args.backend)
    except (ValueError, BackendUnavailable, RuntimeError) as e:
        raise UsageError(str(e)) from None
    print(format_selection(selection))
    # Not assumed: the chosen kernel's family runs once here, its Pallas kernels counted.
    backend = _backend_of(selection)
    ok, line = check_chosen(registry.get_family(selection.kernel), backend,
                            args.seq_len or defaults_for(backend)[0][0])
    print(f"  {line}")
    if args.bench:
        print("\n".join(_bench_candidates(selection, args.seq_len)))
    return 0 if ok else 1


def _backend_of(selection: Any) -> Any:
    """The harness backend that runs on the selection's platform (the CPU: interpret)."""
    return common.backend({"cpu": "interpret"}.get(selection.platform, selection.platform))


def _bench_candidates(selection: Any, seq_len: int | None) -> list[str]:
    """Each candidate family timed and measured at one length on the selection's platform."""
    backend = _backend_of(selection)
    lengths, warmup, iters, seconds = defaults_for(backend)
    settings = BenchSettings(backend=backend, seq_lens=(seq_len or lengths[0],),
                             dtype="bfloat16", mode="fwd", warmup=warmup, iters=iters,
                             max_seconds=seconds)
    names = [c.name for c in CANDIDATES]
    known = {f.name: f for f in common.families([]) if f.name in names}
    rows = {n: bench_family(known[n], settings)[0] if n in known else None for n in names}
    return bench_report.selection_lines(selection, names, rows, settings)
