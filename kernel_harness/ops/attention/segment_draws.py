"""The attention op's segment-layout drawers: layouts as ``(id, length)`` runs
(:mod:`.segments`), per batch row for the op's strategy (:func:`segment_layouts`: any ids,
queries matched to what their rows can see) and one for every row for a packed batch
(:func:`packed_runs` and :func:`aligned_runs`, splash's strategy). Both sometimes spread
the drawn ids far apart (:func:`wide_ids`): ids are labels, only their equality matters.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from hypothesis import strategies as st

from kernel_harness.ops.attention.mask_draws import chance, weighted
from kernel_harness.ops.attention.segments import Runs, segment_ids

#: Strides a layout's ids are sometimes spread by (id -> offset + stride * id): 128 and 256
#: make distinct ids equal in their low 7 or 8 bits and put them past 127 and 255 (a
#: kernel that packs ids into int8/uint8 merges segments), 65536 in their low 16 bits
#: (int16). Offsets (0, 1, 127) keep every id >= 0 and move them off the multiples.
ID_STRIDES: tuple[int, ...] = (256, 128, 65536)
ID_OFFSETS: tuple[int, ...] = (0, 1, 127)
#: Bases a layout's ids are sometimes moved to, consecutive (id -> base + id): past what
#: bfloat16 (256), float16 (2048) and float32 (2^24) hold exactly, so a kernel that carries
#: ids in a float merges neighbouring segments (round 4 of the adversarial set: ids through
#: bfloat16 passed, the strides above keeping rounded ids apart). 2^30 + 3 still fits int32.
ID_BASES: tuple[int, ...] = (1000, 4099, 2**24 + 1, 2**30)
#: How often a drawn layout's ids are spread (:func:`wide_ids`).
WIDE_IDS_CHANCE = 0.4


def wide_ids(draw: st.DrawFn) -> Callable[[int], int]:
    """A relabelling of small segment ids, drawn: the identity, or (about
    :data:`WIDE_IDS_CHANCE` of the time) ``offset + stride * id`` with a stride of
    :data:`ID_STRIDES` (ids past 127 and 255 that agree in their low 8 bits, or 16), or
    ``base + id`` with a base of :data:`ID_BASES` (neighbouring ids a float rounds
    together). Injective and increasing: which positions share a segment, and the ids'
    order, are unchanged. Shrinks towards the identity."""
    if not chance(draw, WIDE_IDS_CHANCE):
        return lambda i: i
    if draw(st.booleans()):
        base = draw(st.sampled_from(ID_BASES))
        return lambda i: base + i
    stride = draw(st.sampled_from(ID_STRIDES))
    offset = draw(st.sampled_from(ID_OFFSETS))
    return lambda i: offset + stride * i


def relabelled(runs: Runs, label: Callable[[int], int]) -> Runs:
    """``runs`` with each id replaced by ``label(id)``."""
    return tuple((label(i), n) for i, n in runs)


def _cuts(draw: st.DrawFn, length: int, max_segments: int) -> list[int]:
    """Run boundaries ``[0, ..., length]``, sometimes with a length-1 run."""
    if length < 2:
        return [0, length]
    cuts = set(draw(st.lists(st.integers(1, length - 1), max_size=max_segments - 1)))
    if cuts and draw(st.booleans()):
        c = draw(st.sampled_from(sorted(cuts)))
        if c + 1 < length:
            cuts.add(c + 1)  # a length-1 segment
    return [0, *sorted(cuts), length]


@st.composite
def segment_runs(draw: st.DrawFn, length: int, *, max_segments: int = 5,
                 max_id: int = 3) -> Runs:
    """A segment layout of ``length`` positions: up to ``max_segments`` runs with ids in
    ``[0, max_id]`` in any order (repeats allowed), sometimes a length-1 run. Shrinks
    towards one segment with id 0."""
    bounds = _cuts(draw, length, max_segments)
    ids = draw(st.lists(st.integers(0, max_id), min_size=len(bounds) - 1,
                        max_size=len(bounds) - 1))
    return tuple((i, hi - lo) for i, lo, hi in zip(ids, bounds, bounds[1:], strict=False))


@st.composite
def matched_runs(draw: st.DrawFn, length: int, kv_runs: Runs, *, causal: bool,
                 max_segments: int = 5, max_id: int = 3) -> Runs:
    """A q layout for kv layout ``kv_runs``: each q run takes an id that its first row can
    see (under ``causal``, one of the kv ids at positions <= that row), except about one
    run in eight after the first, whose id is drawn from ``[0, max_id + 1]`` and may see no
    key at all. The first run always sees a key: a layout in which no row does leaves
    nothing inside the contract to compare. Shrinks towards one run with the first
    visible id."""
    kv_ids = segment_ids(kv_runs)
    bounds = _cuts(draw, length, max_segments)
    runs = []
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        seen = kv_ids[: lo + 1] if causal else kv_ids
        if weighted(draw, ((True, 7), (False, 1))) or lo == 0:
            i = draw(st.sampled_from(sorted({int(x) for x in seen})))
        else:
            i = draw(st.integers(0, max_id + 1))
        runs.append((i, hi - lo))
    return tuple(runs)


@st.composite
def segment_layouts(draw: st.DrawFn, batch: int, q_len: int, kv_len: int, *, causal: bool,
                    shared: bool = False) -> tuple[tuple[Runs, ...], tuple[Runs, ...]]:
    """``(q_segments, kv_segments)``, one layout per batch row: the keys' from
    :func:`segment_runs`; the queries' the same layout (packed self-attention: always with
    ``shared``, one array for both; else half the time where the lengths are equal) or
    :func:`matched_runs` of it; every id then relabelled by one :func:`wide_ids`."""
    kv = tuple(draw(segment_runs(kv_len)) for _ in range(batch))
    if shared or (q_len == kv_len and draw(st.booleans()) is False):
        q = kv
    else:
        q = tuple(draw(matched_runs(q_len, row, causal=causal)) for row in kv)
    label = wide_ids(draw)
    return (tuple(relabelled(r, label) for r in q), tuple(relabelled(r, label) for r in kv))


def packed_runs(draw: st.DrawFn, length: int, ids: list[int] | None) -> Runs:
    """One sequence's layout of 2-6 runs, often with a length-1 run (at an end half the
    time), its ids in order or drawn from ``[0, 3]``, then relabelled by :func:`wide_ids`
    (``ids`` given: drawn from those, as they are)."""
    n = draw(st.integers(2, 6))
    cuts = set(draw(st.lists(st.integers(1, length - 1), min_size=n - 1, max_size=n - 1,
                             unique=True)))
    if chance(draw, 0.5):  # a length-1 segment somewhere, often at an end
        at = draw(st.sampled_from([1, length - 1]) | st.integers(1, length - 2))
        cuts |= {at, at + 1} if at + 1 < length else {at}
    bounds = [0, *sorted(cuts), length]
    lengths = [b - a for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    if ids is None:
        if chance(draw, 0.5):
            ids_seq = list(range(len(lengths)))
        else:
            ids_seq = draw(st.lists(st.integers(0, 3), min_size=len(lengths),
                                    max_size=len(lengths)))
        ids_seq = [*map(wide_ids(draw), ids_seq)]
    else:
        ids_seq = draw(st.lists(st.sampled_from(ids), min_size=len(lengths),
                                max_size=len(lengths)))
    return tuple(zip(ids_seq, lengths, strict=True))


def run_lengths(ids: np.ndarray) -> Runs:
    """The runs of an id sequence (the inverse of :func:`~.segments.segment_ids`)."""
    edges = [0, *(np.flatnonzero(np.diff(ids)) + 1).tolist(), len(ids)]
    return tuple((int(ids[a]), b - a) for a, b in zip(edges[:-1], edges[1:], strict=True))


def aligned_runs(draw: st.DrawFn, q_runs: Runs, kv_len: int) -> Runs:
    """A kv layout for the q layout ``q_runs`` (:func:`packed_runs`): kv ids equal to the q
    ids position by position (packed self-attention); a longer kv sequence continues with
    runs of ids the queries use, a shorter one ends with the ids only late queries use."""
    q_ids = segment_ids(q_runs)
    if kv_len <= len(q_ids):
        kv_ids = q_ids[:kv_len].copy()
        missing = sorted(set(q_ids.tolist()) - set(kv_ids.tolist()))
        if missing:  # the last keys carry the ids only late queries use
            kv_ids[kv_len - len(missing):] = missing
        return run_lengths(kv_ids)
    tail = segment_ids(packed_runs(draw, kv_len - len(q_ids) + 2, sorted({i for i, _ in q_runs})))
    return run_lengths(np.concatenate([q_ids, tail[: kv_len - len(q_ids)]]))
