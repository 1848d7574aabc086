"""The two calls a run makes per (family, property) unit: replay its stored entries before
the search, record its shrunk failure after."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernel_harness.checks.corpus.entry import CorpusEntry, entry_from_failure, failure_of
from kernel_harness.checks.corpus.replay import ReplayResult, replay_entries
from kernel_harness.checks.corpus.store import Corpus
from kernel_harness.core.backends import Backend
from kernel_harness.spec.family import Family


def replay_unit(corpus: Corpus | None, family: Family, prop: str, backend: Backend,
                impl: Callable[..., Any] | None = None,
                impl_spec: str | None = None) -> list[ReplayResult]:
    """Before the unit's search: every stored entry of (family, prop) replayed once
    (``[]`` without a corpus). Any ``failed`` result is the unit's failure; print its
    ``line()`` and ``report``."""
    if corpus is None:
        return []
    return replay_entries(corpus.entries(family.name, prop), family, backend, impl, impl_spec)


def record_failure(corpus: Corpus | None, family: Family, prop: str, error: BaseException,
                   backend: Backend, impl_spec: str | None) -> list[CorpusEntry]:
    """After the unit's search failed with ``error`` (``PropertyOutcome.error``: the
    shrunk example's; with ``all_bugs`` an exception group of several): stores each
    failing example when the corpus is writable. Returns the entries newly stored (none:
    no writable corpus, no failing example in ``error``, or all stored already)."""
    if corpus is None or not corpus.writable:
        return []
    errors = list(error.exceptions) if isinstance(error, BaseExceptionGroup) else [error]
    stored = []
    for one in errors:
        if isinstance(one, BaseExceptionGroup):
            stored += record_failure(corpus, family, prop, one, backend, impl_spec)
            continue
        found = failure_of(one)
        if found is None:
            continue
        case, draws, first_line = found
        entry = entry_from_failure(family=family.name, prop=prop, case=case,
                                   draws_json=draws, first_line=first_line, backend=backend,
                                   impl_spec=impl_spec)
        if corpus.record(entry):
            stored.append(entry)
    return stored
