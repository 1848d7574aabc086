"""How long replaying a failure corpus takes (docs/corpus.md).

    python benchmarks/corpus_replay.py [--corpus LOCATION] [--families splash,hstu,...]
        [--per-family K] [--backend interpret]

Stores K cases of each family, drawn from its strategy (derandomized), as corpus entries
(real cases, as a nightly stores its shrunk failures; the pristine kernel passes them, and
a passing replay costs what a failing one does), then replays them in this fresh process
and prints the time to read the corpus and to replay each family's entries.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings

from kernel_harness.core.backends import resolve_backend
from kernel_harness.orchestration.corpus import entry_from_failure, open_corpus, replay_entries
from kernel_harness.records.registry import get_family


def _cases(family: Any, k: int) -> list[Any]:
    found: list[Any] = []

    @settings(max_examples=k, derandomize=True, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(family.cases())
    def collect(case: Any) -> None:
        found.append(case)

    collect()
    return found[:k]


def main() -> None:
    """Builds the corpus, replays it, prints one line per family and the total."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpus", default=None, help="default: a fresh temporary directory")
    p.add_argument("--families", default="splash,hstu,flash,sdpa")
    p.add_argument("--per-family", type=int, default=2)
    p.add_argument("--backend", default="interpret")
    args = p.parse_args()
    location = args.corpus or tempfile.mkdtemp(prefix="corpus-bench-")
    backend = resolve_backend(args.backend)
    corpus = open_corpus(location, writable=True)
    for name in args.families.split(","):
        family = get_family(name)
        for case in _cases(family, args.per_family):
            corpus.record(entry_from_failure(
                family=name, prop="matches-reference", case=case, draws_json=None,
                first_line="benchmark entry", backend=backend, impl_spec=None))
    print(f"date: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}; uptime:"
          f"{subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    start = time.perf_counter()
    entries = open_corpus(location, writable=False).entries()
    read = time.perf_counter() - start
    print(f"read {len(entries)} entries from {location} in {read * 1000:.0f} ms")
    total = 0.0
    for name in args.families.split(","):
        mine = [e for e in entries if e.family == name]
        t0 = time.perf_counter()
        results = replay_entries(mine, get_family(name), backend)
        took = time.perf_counter() - t0
        total += took
        statuses = ",".join(r.status for r in results)
        print(f"{name}: {len(mine)} entries replayed in {took:.1f} s "
              f"({took / max(1, len(mine)):.1f} s each): {statuses}")
        assert all(r.status == "PASS" for r in results), [r.report for r in results]
    print(f"total: {len(entries)} entries in {total:.1f} s on {backend.name}")


if __name__ == "__main__":
    main()
