"""flywheel-tpu-kv-cache-write's cases: the op's write (:mod:`kernel_harness.ops.
kv_cache_write`) told to the writer as its table of pieces, each inside one page, split
at page edges, at random points or per token, in order or shuffled, with junk columns
past ``num_slices`` the writer must ignore."""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import strategies as st

from kernel_harness.ops.kv_cache_write.cases import KvWriteCase, kv_write_fields

#: How the write is cut into pieces: at page edges only, also at random points, per token.
SPLITS = ("page", "random", "token")


def pieces_per_block(page_size: int, kv_heads: int, head_dim: int) -> int:
    """Pieces one writer program stages, as flywheel-tpu 0.3.0 sizes them
    (``kv_write_pieces_per_block``: a page of K, V and interleaved rows per piece in a
    39 MiB budget, a power of two, at most 64), restated so events need no library (a
    test checks it against the library's where it is installed)."""
    piece_bytes = 2 * page_size * 2 * kv_heads * head_dim * 2
    fitting = (39 * 2**20) // piece_bytes
    return min(1 << (fitting.bit_length() - 1), 64) if fitting else 0


@dataclasses.dataclass(frozen=True, kw_only=True)
class FlywheelKvWriteCase(KvWriteCase):
    """The op's write (:class:`~kernel_harness.ops.kv_cache_write.cases.KvWriteCase`) and
    how the writer's ``slices`` table says it.

    Attributes:
      split: pieces cut at page edges (``page``), also at random points (``random``), or
        one per token (``token``).
      shuffled: the pieces in a random order (they are disjoint: the order is free).
      junk_columns: columns past ``num_slices`` holding plausible pieces that must be
        ignored.
    """

    split: str = "page"
    shuffled: bool = False
    junk_columns: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {self.split!r}")
        if self.junk_columns < 0:
            raise ValueError(f"junk_columns must be >= 0, got {self.junk_columns}")

    def pieces(self) -> list[tuple[int, int, int]]:
        """(cache_row_start, new_row_start, length) of every piece: a run of a sequence's
        new tokens inside one page, cut as :attr:`split` says, ordered as
        :attr:`shuffled` says."""
        table, s, rng = self.page_table(), self.page_size, self.rng(5)
        found, row = [], 0
        for i, (start, n) in enumerate(zip(self.cache_lens, self.new_lens, strict=True)):
            pos, end = start, start + n
            while pos < end:
                stop = min((pos // s + 1) * s, end)
                cuts = _cuts(pos, stop, self.split, rng)
                for a, b in zip(cuts, cuts[1:], strict=False):
                    found.append((int(table[i, a // s]) * s + a % s, row + a - start, b - a))
                pos = stop
            row += n
        if self.shuffled:
            found = [found[j] for j in rng.permutation(len(found))]
        return found

    def materialize(self) -> dict[str, np.ndarray]:
        """The op's inputs, and ``slices`` int32 [3, pieces + junk_columns] with
        ``num_slices`` int32 [1]."""
        inputs = super().materialize()
        pieces = self.pieces()
        rng = self.rng(6)
        junk = [(int(rng.integers(0, self.total_pages)) * self.page_size,
                 int(rng.integers(0, self.rows)), 1) for _ in range(self.junk_columns)]
        columns = pieces + junk
        slices = np.asarray(columns, np.int32).T if columns else np.zeros((3, 0), np.int32)
        return {**inputs, "slices": slices,
                "num_slices": np.asarray([len(pieces)], np.int32)}


def _cuts(start: int, stop: int, split: str, rng: np.random.Generator) -> list[int]:
    """Boundaries of the pieces of [start, stop) (one page's run)."""
    if split == "token":
        return list(range(start, stop + 1))
    inner = sorted(set(rng.integers(start + 1, stop, 2).tolist())) if (
        split == "random" and stop - start > 1) else []
    return [start, *inner, stop]


@st.composite
def flywheel_kv_write_cases(draw: st.DrawFn) -> FlywheelKvWriteCase:
    """The op's fields (bfloat16, 128-token pages, head_dim 128 and 256, 1-16 kv heads,
    up to 4 sequences of up to 3 pages), then the pieces' split, order and junk."""
    fields = draw(kv_write_fields(page_sizes=(128,), kv_heads=(1, 2, 3, 16),
                                  head_dims=(128, 256), max_pages_per_seq=3))
    return FlywheelKvWriteCase(**fields, split=draw(st.sampled_from(SPLITS)),
                               shuffled=draw(st.booleans()),
                               junk_columns=draw(st.sampled_from((0, 3))))
