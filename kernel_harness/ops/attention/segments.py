"""Segment layouts in the attention op's one spelling: runs of ``(segment id, length)``.

``((2, 2), (0, 3), (1, 1))`` is the id sequence ``[2, 2, 0, 0, 0, 1]``. A case holds runs,
never id arrays, so it prints readably; the ids come from :func:`segment_ids`, the dense
mask from :func:`~kernel_harness.ops.attention.reference.visibility`. A case may give one
layout for every batch row (splash, hstu) or one per row (:func:`check_rows`: flash,
gpu-mha).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

Runs = tuple[tuple[int, int], ...]
"""A segment layout of one sequence: ``(segment id, length)`` runs in order."""


def segment_ids(runs: Runs) -> np.ndarray:
    """The int32 id per position, e.g. ``((2, 2), (0, 1))`` -> ``[2, 2, 0]``."""
    return np.concatenate([np.full(n, i, np.int32) for i, n in runs])


def stacked_ids(rows: Sequence[Runs]) -> np.ndarray:
    """int32 ``[rows, length]``: :func:`segment_ids` of each row's layout."""
    return np.stack([segment_ids(r) for r in rows])


def check_runs(name: str, runs: Runs, length: int) -> None:
    """Raises unless ``runs`` is non-empty ``(id >= 0, length >= 1)`` pairs summing to
    ``length``."""
    if not runs:
        raise ValueError(f"{name} must hold at least one (id, length) run, got {runs!r}")
    for run in runs:
        if len(run) != 2:
            raise ValueError(f"{name}: run {run!r} must be an (id, length) pair")
        if run[0] < 0:
            raise ValueError(f"{name}: run {run!r} must have id >= 0")
        if run[1] < 1:
            raise ValueError(f"{name}: run {run!r} must have length >= 1")
    if sum(r[1] for r in runs) != length:
        raise ValueError(f"{name} run lengths must sum to {length}, got {runs}")


def check_rows(name: str, rows: Sequence[Runs], batch: int, length: int) -> None:
    """Raises unless ``rows`` is one valid layout (:func:`check_runs`) per batch row."""
    if len(rows) != batch:
        raise ValueError(f"{name} needs one layout per batch row ({batch}), got {len(rows)}")
    for row in rows:
        check_runs(name, row, length)


def check_pair(q_segments: object, kv_segments: object) -> None:
    """Raises unless the query and key layouts are both given or both None."""
    if (q_segments is None) != (kv_segments is None):
        raise ValueError("q_segments and kv_segments must both be given or both be None")
