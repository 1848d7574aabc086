"""The corpus as the check session will drive it, for tests: before a (family, property)
unit's search, replay its stored entries (a failing replay is the unit's failure); after
the unit fails, record its shrunk failing case. Run as a module, one unit recording into
a corpus (the concurrency tests start two at once)."""

from __future__ import annotations

import argparse
import dataclasses
import time

from kernel_harness.checks.properties import PROPERTIES, Observer, run_property
from kernel_harness.core.backends import resolve_backend
from kernel_harness.orchestration.corpus import (
    Corpus,
    ReplayResult,
    entry_from_failure,
    open_corpus,
    record_failure,
    replay_unit,
)
from kernel_harness.records.impl import load_impl
from kernel_harness.records.registry import get_family
from kernel_harness.run.profiles import get_profile


@dataclasses.dataclass
class UnitRun:
    """What one unit did: replays, whether its search ran and failed, what it recorded."""

    replayed: list[ReplayResult]
    searched: bool
    failed: bool
    recorded: list[str]


def run_unit(corpus: Corpus | None, family_name: str, prop: str, *, impl_spec: str | None,
             seed: int | None, max_examples: int, profile: str = "ci") -> UnitRun:
    """One unit, replay first (whatever ``max_examples``/``seed`` say), then the search."""
    family = get_family(family_name)
    backend = resolve_backend("interpret")
    impl = load_impl(impl_spec) if impl_spec else None
    replayed = replay_unit(corpus, family, prop, backend, impl, impl_spec)
    if any(r.failed for r in replayed):
        return UnitRun(replayed=replayed, searched=False, failed=True, recorded=[])
    observer = Observer()
    test = PROPERTIES[prop](family, backend=backend, impl=impl, impl_spec=impl_spec,
                            observer=observer)
    outcome = run_property(prop, family, test, backend=backend, observer=observer,
                           profile=get_profile(profile), max_examples=max_examples, seed=seed)
    recorded = []
    if outcome.error is not None:
        recorded = [e.id for e in record_failure(corpus, family, prop, outcome.error,
                                                 backend, impl_spec)]
    return UnitRun(replayed=replayed, searched=True, failed=outcome.error is not None,
                   recorded=recorded)


def main() -> None:
    """``python -m tests.helpers.corpus_session LOCATION IMPL SEED START_AT``: waits until
    wall time START_AT (so two processes record at once), runs the toy unit, prints the
    recorded ids."""
    p = argparse.ArgumentParser()
    p.add_argument("location")
    p.add_argument("impl")
    p.add_argument("seed", type=int)
    p.add_argument("start_at", type=float)
    p.add_argument("--synthetic", type=int, default=0,
                   help="first record this many distinct hand-made entries of a family "
                        "'toy-load' (never replayed here), as fast as it can")
    p.add_argument("--offset", type=int, default=0, help="case seed of the first of them")
    args = p.parse_args()
    from kernel_harness.records import registry

    registry.BUILTIN_FAMILIES.setdefault("toy", "tests.helpers.toy_family:FAMILY")
    corpus = open_corpus(args.location, writable=True)
    get_family("toy")  # import jax and the family before the start line
    from tests.helpers.toy_family import ToyCase

    backend = resolve_backend("interpret")
    time.sleep(max(0.0, args.start_at - time.time()))
    began = time.time()
    for i in range(args.synthetic):
        case = ToyCase(dtype="float32", seed=10_000 + args.offset + i, length=4)
        corpus.record(entry_from_failure(
            family="toy-load", prop="matches-reference", case=case, draws_json=None,
            first_line=f"synthetic {i}", backend=backend, impl_spec=args.impl))
    ended = time.time()
    run = run_unit(corpus, "toy", "matches-reference", impl_spec=args.impl, seed=args.seed,
                   max_examples=20)
    print(f"window {began} {ended}")
    print("recorded", *run.recorded, "failed" if run.failed else "passed")


if __name__ == "__main__":
    main()
