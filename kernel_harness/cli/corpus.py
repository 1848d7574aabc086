"""``kernel-harness corpus list|show|replay|drop|promote|check|push --corpus LOCATION``: the
stored failures (see :mod:`kernel_harness.orchestration.corpus`); ``check`` lists the bad
entries a run would skip (:mod:`kernel_harness.orchestration.corpus.quarantine`), ``drop
--bad`` removes them."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from kernel_harness.cli import common
from kernel_harness.core.backends import BackendUnavailable
from kernel_harness.core.errors import UsageError
from kernel_harness.orchestration.corpus import (
    ACCEPTED,
    Corpus,
    CorpusEntry,
    ReplayResult,
    open_corpus,
    read_spill,
    replay_entries,
    repro_command,
)
from kernel_harness.orchestration.corpus.quarantine import BadEntry, case_problem
from kernel_harness.records.impl import load_impl
from kernel_harness.records.registry import UnknownFamily, get_family
from kernel_harness.regression.promote import promote
from kernel_harness.run.runner import ensure_supported


def add_parser(sub: Any) -> None:
    """Adds ``kernel-harness corpus ...``."""
    corpus = sub.add_parser("corpus", help="list, replay, drop or promote stored failures")
    csub = corpus.add_subparsers(dest="corpus_command", required=True)

    def command(name: str, text: str) -> Any:
        p = csub.add_parser(name, help=text)
        common.add_corpus_flag(p, text=ACCEPTED)
        return p

    ls = command("list", "one line per stored failure")
    ls.add_argument("family", nargs="*", help="only these families")
    ls.add_argument("--property", default=None, help="only this property")
    show = command("show", "one entry whole, and its repro command")
    show.add_argument("id", help="the entry's id (or its first 4+ characters)")
    show.add_argument("--backend", default=None, help="for the repro command "
                      "(default: the backend it was found on)")
    replay = command("replay", "run every stored case once; exit 1 if any fails")
    replay.add_argument("family", nargs="*", help="only these families (default: all stored)")
    replay.add_argument("--property", default=None, help="only this property")
    common.add_backend_flag(replay)
    replay.add_argument("--impl", default=None, help="MODULE:ATTR replacing one family's "
                        "kernel (name that family)")
    drop = command("drop", "remove one entry (a case that now passes stays until dropped), "
                   "or with --bad every bad one")
    drop.add_argument("id", nargs="?", default=None)
    drop.add_argument("--bad", action="store_true", help="remove every bad entry that "
                      "`corpus check` lists")
    check = command("check", "list every bad entry (failed hash, not JSON, unknown format "
                    "version, a case refused or past the limits); exit 1 if any")
    check.add_argument("location", nargs="?", default=None,
                       help="the corpus (instead of --corpus)")
    push = csub.add_parser("push", help="deliver the failures a run kept in its spill file "
                           "(its corpus was unreachable) to a corpus")
    push.add_argument("spill", help="the spill file (the run's corpus LOST line and its "
                      "JSON's corpus.spill name it)")
    push.add_argument("location", nargs="?", default=None,
                      help="the corpus (instead of --corpus)")
    common.add_corpus_flag(push, text=ACCEPTED)
    prom = command("promote", "make an entry a golden case of its family's manifest")
    prom.add_argument("id")
    prom.add_argument("--why", required=True, help="which path or bug this case pins")
    prom.add_argument("--name", default=None, help="golden case name (default corpus-ID8)")
    prom.add_argument("--tag", action="append", default=[])
    common.add_backend_flag(prom)
    prom.add_argument("--golden-dir", type=Path, default=None)


def run(args: Any) -> int:
    """Runs ``kernel-harness corpus ...``: 0 ok, 1 a replay or promotion failed."""
    command = args.corpus_command
    if getattr(args, "location", None):
        args.corpus = args.location
    if args.corpus is None:
        raise UsageError(f"corpus {command}: no corpus: give --corpus LOCATION, or set corpus "
                         "in [tool.kernel-harness] of your pyproject.toml")
    corpus = open_corpus(args.corpus, writable=command in ("drop", "push"))
    if command == "push":
        return _push(args.spill, corpus)
    if command == "list":
        entries = [e for e in corpus.entries(prop=args.property)
                   if not args.family or e.family in args.family]
        for e in entries:
            print(e.line())
        print(f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'} in {corpus.location}")
        return 0
    if command == "show":
        entry = corpus.find(args.id)
        print(json.dumps(json.loads(entry.to_json()), indent=1, sort_keys=True))
        print(f"reproduce: {_command(entry, args.backend or entry.backend)}")
        return 0
    if command == "check":
        return _check(corpus)
    if command == "drop":
        if args.bad == (args.id is not None):
            raise UsageError("corpus drop: give an entry ID or --bad (not both)")
        if args.bad:
            bad, _ = _bad_entries(corpus)
            for b in bad:
                corpus.drop_bad(b)
                print(f"dropped bad entry {b.id} ({b.family} {b.prop}: {b.reason})")
            print(f"{len(bad)} bad entr{'y' if len(bad) == 1 else 'ies'} dropped from "
                  f"{corpus.location}")
            return 0
        entry = corpus.drop(args.id)
        if isinstance(entry, BadEntry):
            print(f"dropped bad entry {entry.id} ({entry.family} {entry.prop}: {entry.reason})")
        else:
            print(f"dropped {entry.id} ({entry.family} {entry.prop}, found {entry.date})")
        return 0
    if command == "promote":
        entry = corpus.find(args.id)
        (family,) = common.families([entry.family])
        outcome = promote(entry, family, why=args.why, backend=common.backend(args.backend),
                          name=args.name, tags=tuple(args.tag), root=args.golden_dir)
        print(f"{outcome.status} golden {outcome.family}/{outcome.name}: {outcome.detail}")
        if outcome.ok:
            print(f"  the corpus keeps {entry.id}; `kernel-harness corpus drop {entry.id[:8]} "
                  f"--corpus {corpus.location}` removes it")
        return 0 if outcome.ok else 1
    return _replay(args, corpus.entries(prop=args.property), corpus.location)


def _push(spill: str, corpus: Corpus) -> int:
    """Records every entry of the spill file in ``corpus`` (one there already is counted,
    not stored twice); the file stays, to delete once delivered."""
    entries = read_spill(spill)
    new = [e for e in entries if corpus.record(e)]
    for e in new:
        print(f"pushed {e.id} ({e.family} {e.prop}, found {e.date})")
    print(f"{len(new)} of {len(entries)} entr{'y' if len(entries) == 1 else 'ies'} of {spill} "
          f"stored in {corpus.location} ({len(entries) - len(new)} there already); the spill "
          "file is kept: delete it once you no longer need it")
    return 0


def _bad_entries(corpus: Corpus) -> tuple[list[BadEntry], int]:
    """Every bad entry of ``corpus``: the store's own checks, then each case against its
    family's case type (a family not registered here is not checked, and said so)."""
    unknown: set[str] = set()

    def check(entry: CorpusEntry) -> str:
        try:
            return case_problem(entry, get_family(entry.family))
        except UnknownFamily:
            unknown.add(entry.family)
            return ""

    good = len(corpus.entries(check=check))
    for name in sorted(unknown):
        print(f"note: entries of {name} not checked against its case type: the family is "
              "not registered here (give --family-module MODULE)")
    return sorted(corpus.quarantined.values(), key=lambda b: (b.family, b.prop, b.id)), good


def _check(corpus: Corpus) -> int:
    bad, good = _bad_entries(corpus)
    for b in bad:
        print(b.line(corpus.location))
    print(f"{len(bad)} bad entr{'y' if len(bad) == 1 else 'ies'}, {good} good, in "
          f"{corpus.location}" + (f"; `kernel-harness corpus drop --bad --corpus "
                                  f"{corpus.location}` removes them" if bad else ""))
    return 1 if bad else 0


def _command(entry: CorpusEntry, backend: str) -> str:
    try:
        family = get_family(entry.family)
        case = family.case_type.from_json(entry.case_json)
    except (UnknownFamily, ValueError, TypeError) as e:
        return f"none ({e})"
    return repro_command(entry, case, backend, entry.impl, family.adjustments)


def _replay(args: Any, entries: list[CorpusEntry], location: str) -> int:
    names = list(args.family) or sorted({e.family for e in entries})
    if args.impl and len(names) != 1:
        raise UsageError("--impl replaces one family's kernel: name exactly one family")
    families = common.families(names)  # an unknown family named or stored: exit 2
    backend = common.backend(args.backend)
    impl = load_impl(args.impl) if args.impl else None
    results: list[ReplayResult] = []
    start = time.perf_counter()
    for family in families:
        mine = [e for e in entries if e.family == family.name]
        try:
            ensure_supported(family, backend)
        except BackendUnavailable as e:
            if mine:
                print(f"[kernel-harness] corpus SKIP {family.name}: {len(mine)} entries not "
                      f"replayed: {e}")
            continue
        for result in replay_entries(mine, family, backend, impl, args.impl):
            print(result.line())
            if result.failed:
                print(result.report)
            results.append(result)
    counts = {s: sum(r.status == s for r in results)
              for s in ("PASS", "FAIL", "CRASH", "ERROR", "SKIP")}
    failed = sum(r.failed for r in results)
    tally = ", ".join(f"{v} {k.lower()}" for k, v in counts.items() if v) or "nothing"
    if not results:
        print(f"no entry replayed from {location} on {backend.name} (none stored for "
              f"{', '.join(names) or 'any family'})")
        return 0
    print(f"\n{'FAIL' if failed else 'PASS'}: corpus replay on {backend.name}: {tally} "
          f"({len(results)} entr{'y' if len(results) == 1 else 'ies'} in "
          f"{time.perf_counter() - start:.1f}s)")
    return 1 if failed else 0
