"""``kernel-harness merge A.json B.json ... [--json PATH] [--junit PATH]``: the results of
several ``check`` runs (the shards of one nightly) as one summary, one exit code, one
document and one JUnit file (:mod:`kernel_harness.regression.merge`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernel_harness.orchestration import results
from kernel_harness.regression import merge
from kernel_harness.run import report
from kernel_harness.run.outputs import ensure_writable


def add_parser(sub: Any) -> None:
    """Adds ``kernel-harness merge`` to the subparsers."""
    p = sub.add_parser("merge", help="merge the --json results of several check runs")
    p.add_argument("inputs", nargs="+", type=Path, metavar="RESULTS.json",
                   help="documents written by `kernel-harness check --json`")
    p.add_argument("--json", type=Path, default=None, metavar="PATH",
                   help="write the merged document (schema: check-results-v1.json)")
    p.add_argument("--junit", type=Path, default=None, metavar="PATH",
                   help="write one JUnit XML file for all inputs")


def run(args: Any) -> int:
    """Prints one table and one verdict: exit 0 only if a unit ran and every one that ran
    passed; 1 otherwise; 2 (UsageError) for inputs that cannot be merged honestly."""
    ensure_writable({"--json": args.json, "--junit": args.junit})
    inputs = [(str(p), merge.load_results(p)) for p in args.inputs]
    doc = merge.merge_documents(inputs)
    source = merge.source_of(inputs)
    rows = [[r["family"], r["property"], r["verdict"], r["examples"], f"{r['seconds']:.1f}",
             source[(r["family"], r["property"])], merge.detail(r)]
            for r in doc["properties"]]
    print(report.format_table(["family", "property", "verdict", "examples", "seconds", "from",
                               "detail"], rows))
    s = doc["summary"]
    env = doc["environment"]
    counts = ", ".join(f"{s[k]} {k}" for k in ("pass", "fail", "flaky", "error", "interrupted",
                                               "skip") if s.get(k))
    ran = s["pass"] + s["fail"] + s["error"] + s.get("flaky", 0) + s.get("interrupted", 0)
    print(f"\n{'PASS' if s['ok'] else 'FAIL'}: {len(inputs)} results merged (backend "
          f"{env['backend']}, jax {env['jax']}): {counts or 'no records'}"
          + ("" if ran else "; nothing ran, which is not a pass"))
    results.write_outputs(doc, json_path=args.json, junit_path=args.junit)
    return 0 if s["ok"] else 1
