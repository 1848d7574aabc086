"""Splitting a run over N hosts (``check --shard I/N``): a deterministic share of the
(family, property) units for each, and a seed of its own for each."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import TypeVar

from kernel_harness.core.errors import UsageError

T = TypeVar("T")

_SPEC = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


def parse_shard(shard: str) -> tuple[int, int]:
    """``"2/4"`` -> ``(2, 4)``; anything but ``I/N`` with ``1 <= I <= N`` is a UsageError."""
    m = _SPEC.match(str(shard))
    if not m:
        raise UsageError(f"--shard {shard!r}: give I/N, e.g. 1/4 (shard I of N, 1-based)")
    i, n = int(m.group(1)), int(m.group(2))
    if n < 1 or not 1 <= i <= n:
        raise UsageError(f"--shard {shard}: need 1 <= I <= N and N >= 1")
    return i, n


def shard_units(units: Sequence[T], shard: str) -> list[T]:
    """Shard ``I/N``'s units: every N-th unit from the I-th, in the given order.

    Every unit lands in exactly one shard, and shard sizes differ by at most one. Each
    host must list the units in the same order (the same command line on the same
    checkout): the split depends on the order only, never on the machine."""
    i, n = parse_shard(shard)
    return [u for k, u in enumerate(units) if k % n == i - 1]


def shard_seed(seed: int | None, shard: str | None) -> int | None:
    """The seed shard ``I/N`` runs with, so N hosts given one ``--seed`` draw different
    examples (and each shard rerun with it draws the same again).

    No shard, or ``1/1``: ``seed`` itself. No seed: None (each host keeps the profile's
    own choice: a fresh random seed, or ``ci``'s derandomized draws, which differ between
    shards anyway since no unit runs on two). Otherwise a 32-bit number derived from
    ``seed``, I and N; the run must print it beside the repro lines."""
    if shard is None:
        return seed
    i, n = parse_shard(shard)
    if seed is None or n == 1:
        return seed
    digest = hashlib.sha256(f"kernel-harness-shard:{seed}:{i}/{n}".encode()).digest()
    return int.from_bytes(digest[:4], "big")
