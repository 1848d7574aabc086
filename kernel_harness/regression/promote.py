"""``corpus promote``: a stored failure becomes a named golden case with its ``why``.

The golden is recorded like ``golden add`` records one: the case's inputs and reference
outputs, after the kernel (the fixed one, by now) passes it. The corpus entry stays
until dropped on purpose.
"""

from __future__ import annotations

import json
from pathlib import Path

from kernel_harness.core.backends import Backend
from kernel_harness.core.errors import UsageError
from kernel_harness.orchestration.corpus import CorpusEntry
from kernel_harness.records.family import Family
from kernel_harness.regression.golden import (
    GoldenCase,
    GoldenOutcome,
    add_case,
)


def default_name(entry: CorpusEntry) -> str:
    """``corpus-<first 8 digits of the id>``: a golden name for a promoted entry."""
    return f"corpus-{entry.id[:8]}"


def promote(
    entry: CorpusEntry, family: Family, *, why: str, backend: Backend,
    name: str | None = None, tags: tuple[str, ...] = (), root: Path | None = None,
) -> GoldenOutcome:
    """Adds ``entry``'s case to ``family``'s golden manifest as ``name`` with ``why`` and
    records its golden files on ``backend``. The manifest changes only when the recording
    succeeded (``outcome.ok``); an empty ``why``, a taken name or an entry of another
    family is a UsageError."""
    if entry.family != family.name:
        raise UsageError(f"corpus entry {entry.id} is of family {entry.family}, "
                         f"not {family.name}")
    if not why.strip():
        raise UsageError("promote needs --why TEXT: which path or bug this case pins")
    name = name or default_name(entry)
    try:
        case = family.case_type.from_json(json.dumps(entry.case))
        gcase = GoldenCase(name=name, case=case, tags=tags, why=why.strip())
    except (ValueError, TypeError) as e:
        raise UsageError(f"promote {entry.id}: {e}") from None
    try:
        return add_case(family, gcase, backend, root=root)
    except ValueError as e:
        raise UsageError(f"promote: {e} (give another --name)") from None
