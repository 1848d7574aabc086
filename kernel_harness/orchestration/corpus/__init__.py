"""The failure corpus: failing examples kept across runs and machines, replayed first.

A run with a corpus (``corpus_mode``, ``open_corpus``) replays every stored entry of each
(family, property) unit it runs before that unit's Hypothesis search (``replay_unit``,
over ``replay_entries``), and records the unit's shrunk failure (``record_failure``, over
``failure_of``, ``entry_from_failure`` and ``Corpus.record``). Entries are the harness's
readable case JSON (:mod:`.entry`) stored through Hypothesis's example databases
(:mod:`.store`): a directory, a shared Redis, a GitHub Actions artifact, read-only or not.
"""

from kernel_harness.orchestration.corpus.entry import (
    SCHEMA,
    CorpusEntry,
    CorpusError,
    entry_from_failure,
    entry_id,
    failure_of,
)
from kernel_harness.orchestration.corpus.outage import (
    Lost,
    Outage,
    StoreUnreachable,
    read_spill,
    spill_path_for,
)
from kernel_harness.orchestration.corpus.replay import ReplayResult, replay_entries, repro_command
from kernel_harness.orchestration.corpus.store import (
    ACCEPTED,
    Corpus,
    CorpusMode,
    corpus_mode,
    open_corpus,
)
from kernel_harness.orchestration.corpus.unit import record_failure, replay_unit

__all__ = [
    "ACCEPTED",
    "SCHEMA",
    "Corpus",
    "CorpusEntry",
    "CorpusError",
    "CorpusMode",
    "Lost",
    "Outage",
    "ReplayResult",
    "StoreUnreachable",
    "corpus_mode",
    "entry_from_failure",
    "entry_id",
    "failure_of",
    "open_corpus",
    "read_spill",
    "record_failure",
    "replay_entries",
    "replay_unit",
    "repro_command",
    "spill_path_for",
]
