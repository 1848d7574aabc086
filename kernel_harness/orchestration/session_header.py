"""The lines a check session prints first: what runs (backend, profile, jax, families), the
implementation, the corpus, the worker processes and the adjustments."""

from __future__ import annotations

from typing import Any

import jax

from kernel_harness.orchestration.results import jax_numerics
from kernel_harness.records.narrow import describe_adjustments


def header_lines(session: Any) -> list[str]:
    """What runs: backend, profile, jax, families, the implementation, the adjustments."""
    lines = [
        f"kernel-harness check: backend {session.backend.name} ({session.backend.note}), profile "
        f"{session.request.profile}, jax {jax.__version__}, families "
        f"{', '.join(f.name for f in session.families) or '-'}",
        f"  {session.cache_note}; shrink budget {session.shrink_budget}; "
        f"{session.draws_per_compile} data draws per compiled program",
    ]
    if numerics := jax_numerics():
        lines.append("  jax numerics not jax's defaults: " + ", ".join(
            f"{k}={v}" for k, v in numerics.items()) + " (every XLA computation of this run, "
            "references included)")
    if session.impl_label is not None:
        lines.append(f"  impl: {session.impl_label}")
    if getattr(session, "declared_note", None):
        lines.append(f"  {session.declared_note}")
    if session.request.shard is not None:
        lines.append(f"  shard {session.request.shard}: {len(session.units)} units, seed "
                     f"{session.seed}")
    if session.corpus is not None:
        lines.append(f"  corpus {session.corpus.location} ({session.corpus_mode}): " + (
            "LOST (above)" if session.corpus.lost else "its entries replay first, before "
            "each unit's search"))
    if session.isolated:
        limit = f"--timeout {session.timeout:g}s per example; " if session.timeout else ""
        lines.append(f"  ({limit}units run in a worker process: a hang or a native crash "
                     "is reported and the run goes on)")
    for fam in session.families:
        lines += [f"  {fam.name}: {line}" for line in adjustment_lines(session, fam)]
    return lines


def adjustment_lines(session: Any, family: Any) -> list[str]:
    """How ``family`` is checked differently from its registered form in ``session``: the
    features left out (those the project's configuration left out say so) and tolerance
    overrides."""
    return describe_adjustments(family, getattr(session, "without_origins", {}).get(family.name))
