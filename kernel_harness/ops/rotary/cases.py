"""The rotary op's case vocabulary, strategy and events.

A case is a packed batch of sequences (tokens of sequence i at positions offsets[i],
offsets[i] + 1, ...), pad tokens after them (outside the contract), heads of head_dim
dims rotated over their first rotary_dim, in one pairing, with the frequency base. Its
inputs carry the cos/sin tables [table_len, rotary_dim / 2] a kernel takes (the
definition's float64 values rounded to float32); the reference does not read them.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np
from hypothesis import strategies as st

from kernel_harness.core.case import Case, check_sizes, standard_normal
from kernel_harness.ops.rotary.reference import PAIRINGS, rotary, rotary_tables

#: Positions from here on have angles float32 cannot hold to its ulp (2^16 radians at
#: inv_freq 1: the float32 ulp there is 2^-7): the reference computes them in float64.
LARGE_POSITION = 2**16

#: The dtypes of x the op's strategy draws (the tables are float32).
DTYPES: tuple[str, ...] = ("float32", "bfloat16")


@dataclasses.dataclass(frozen=True, kw_only=True)
class RotaryCase(Case):
    """One rotary call over packed sequences.

    Attributes:
      seq_lens: tokens per sequence (>= 1), packed one after another.
      offsets: per sequence, the position of its first token (>= 0).
      pad_tokens: tokens after the last sequence, outside the contract (position 0).
      heads, head_dim: x is [tokens, heads, head_dim].
      rotary_dim: dims rotated (even, <= head_dim); the rest pass through.
      pairing: ``split`` (dims i, i + rotary_dim / 2) or ``interleaved`` (2i, 2i + 1).
      base: the frequency base (inv_freq[i] = base ** (-2i / rotary_dim)).
    """

    seq_lens: tuple[int, ...]
    offsets: tuple[int, ...]
    heads: int
    head_dim: int
    rotary_dim: int
    pairing: str = "split"
    base: float = 10000.0
    pad_tokens: int = 0

    #: The tables' values follow the base; everything else selects the program.
    DYNAMIC_FIELDS: ClassVar[frozenset[str]] = frozenset({"seed", "base"})

    def __post_init__(self) -> None:
        super().__post_init__()
        check_sizes(self, "heads", "head_dim", "rotary_dim")
        if not self.seq_lens or len(self.seq_lens) != len(self.offsets):
            raise ValueError("seq_lens and offsets need one entry per sequence, and at least "
                             "one sequence")
        if any(n < 1 for n in self.seq_lens) or any(o < 0 for o in self.offsets):
            raise ValueError(f"seq_lens must be >= 1 and offsets >= 0, got {self.seq_lens}, "
                             f"{self.offsets}")
        if self.rotary_dim % 2 or self.rotary_dim > self.head_dim:
            raise ValueError(f"rotary_dim must be even and <= head_dim={self.head_dim}, got "
                             f"{self.rotary_dim}")
        if self.pairing not in PAIRINGS:
            raise ValueError(f"pairing must be one of {PAIRINGS}, got {self.pairing!r}")
        if not self.base > 1:
            raise ValueError(f"base must be > 1, got {self.base}")
        if self.pad_tokens < 0:
            raise ValueError(f"pad_tokens must be >= 0, got {self.pad_tokens}")

    @property
    def tokens(self) -> int:
        """Rows of x: every sequence's tokens, then the pad tokens."""
        return sum(self.seq_lens) + self.pad_tokens

    @property
    def seq_ends(self) -> tuple[int, ...]:
        """Per sequence, one past its last position (offset + length)."""
        return tuple(o + n for o, n in zip(self.offsets, self.seq_lens, strict=True))

    @property
    def table_len(self) -> int:
        """Rows of the cos/sin tables: every position the sequences reach."""
        return max(self.seq_ends)

    def positions(self) -> np.ndarray:
        """int32 [tokens]: each token's position (0 for the pad tokens)."""
        parts = [o + np.arange(n) for o, n in zip(self.offsets, self.seq_lens, strict=True)]
        return np.concatenate([*parts, np.zeros(self.pad_tokens, int)]).astype(np.int32)

    def token_rows(self) -> np.ndarray:
        """bool [tokens]: the sequences' tokens (pad tokens are outside the contract)."""
        return np.arange(self.tokens) < sum(self.seq_lens)

    def materialize(self) -> dict[str, np.ndarray]:
        """x and dout [tokens, heads, head_dim] ~ N(0, 1) in the dtype; cos, sin float32
        [table_len, rotary_dim / 2] (the definition at positions 0..table_len - 1);
        positions, cu_seqlens [num_seqs + 1] and seq_ends as int32."""
        rng = self.rng()
        shape = (self.tokens, self.heads, self.head_dim)
        cos, sin = rotary_tables(np.arange(self.table_len), self.rotary_dim, self.base)
        return {"x": standard_normal(rng, shape, self.dtype),
                "dout": standard_normal(rng, shape, self.dtype),
                "cos": cos.astype(np.float32), "sin": sin.astype(np.float32),
                "positions": self.positions(),
                "cu_seqlens": np.concatenate([[0], np.cumsum(self.seq_lens)]).astype(np.int32),
                "seq_ends": np.asarray(self.seq_ends, np.int32)}


def reference(case: RotaryCase, inputs: dict[str, np.ndarray], *, gradients: bool = True
              ) -> dict[str, np.ndarray]:
    """The op's reference (:func:`~kernel_harness.ops.rotary.reference.rotary`) at the
    case's positions: ``out``, and ``dx`` at ``dout`` with ``gradients``."""
    return rotary(inputs["x"], inputs["dout"] if gradients else None, case.positions(),
                  pairing=case.pairing, rotary_dim=case.rotary_dim, base=case.base)


def valid(case: RotaryCase) -> dict[str, np.ndarray]:
    """Pad tokens are outside the contract (of out and dx)."""
    rows = case.token_rows()
    return {} if rows.all() else {o: rows[:, None, None] for o in ("out", "dx")}


@st.composite
def rotary_fields(draw: st.DrawFn, *, dtypes: tuple[str, ...] = DTYPES,
                  head_dims: tuple[int, ...] = (64, 128), partial: bool = True,
                  pairings: tuple[str, ...] = PAIRINGS, max_seqs: int = 3,
                  max_len: int = 40) -> dict[str, Any]:
    """The :class:`RotaryCase` fields: 1-``max_seqs`` sequences of 1-``max_len`` tokens,
    each starting at 0, at an odd position, or past :data:`LARGE_POSITION` (odd too); 0-3
    pad tokens; rotary_dim the head_dim or (``partial``) half of it. Shrinks towards one
    short sequence at 0."""
    n = draw(st.integers(1, max_seqs))
    seq_lens = tuple(draw(st.integers(1, max_len)) for _ in range(n))
    offsets = tuple(draw(st.one_of(
        st.just(0), st.integers(0, 499).map(lambda k: 2 * k + 1),
        st.integers(0, 2047).map(lambda k: LARGE_POSITION + 2 * k + 1))) for _ in range(n))
    head_dim = draw(st.sampled_from(head_dims))
    rotary_dim = draw(st.sampled_from((head_dim, head_dim // 2) if partial else (head_dim,)))
    return dict(dtype=draw(st.sampled_from(dtypes)), seed=draw(st.integers(0, 2**16)),
                seq_lens=seq_lens, offsets=offsets, heads=draw(st.integers(1, 3)),
                head_dim=head_dim, rotary_dim=rotary_dim,
                pairing=draw(st.sampled_from(pairings)),
                base=draw(st.sampled_from((10000.0, 500000.0))),
                pad_tokens=draw(st.integers(0, 3)))


def rotary_events(case: RotaryCase) -> list[str]:
    """What a case reaches: the pairing, large and odd positions, several sequences,
    partial rotary, pad tokens."""
    ev = [case.dtype, f"pairing:{case.pairing}"]
    if any(o + n > LARGE_POSITION for o, n in zip(case.offsets, case.seq_lens, strict=True)):
        ev.append("large-positions")
    if any(o % 2 for o in case.offsets):
        ev.append("odd-offset")
    if 0 in case.offsets:
        ev.append("zero-offset")
    if len(case.seq_lens) > 1:
        ev.append("multi-seq")
    if case.rotary_dim < case.head_dim:
        ev.append("partial-rotary")
    if case.pad_tokens:
        ev.append("pad-tokens")
    return sorted(ev)
