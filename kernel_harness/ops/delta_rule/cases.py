"""Cases of the delta-rule (linear attention) op and the strategy.

A case is one chunked delta-rule call and its vjp: q, k [batch, seq_len, key_heads,
key_dim], v [batch, seq_len, value_heads, value_dim], the log decay g and the erase gate b
per key channel (like k), the write gate w per value channel (like v), an optional initial
state [batch, value_heads, key_dim, value_dim], and documents that reset the state. The
recurrence is defined in :mod:`.reference`. The kernel works in chunks of ``chunk_size``
tokens; the hard paths live where a chunk mixes things: a document boundary inside it, a
partly filled last chunk, strongly decayed tokens next to weakly decayed ones (``burst``),
a chunk whose q, k and v are all zero.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np

from kernel_harness.core.case import Case, cast, check_sizes

#: How the log decay g (<= 0) is drawn. ``ordinary``: -exp(N(0, 0.39) - 1), a mean decay
#: near exp(-0.37) per token (the library README's draw); ``weak``: g in [-0.05, -1e-3]
#: (the state remembers ~100 tokens); ``burst``: ordinary tokens, then inside one chunk a
#: run of tokens at -burst_strength (the state all but erased) followed by weak ones,
#: where a chunked kernel relating tokens by their cumulative decay loses precision.
DECAY_REGIMES: tuple[str, ...] = ("ordinary", "weak", "burst")
#: The op's optional features (``--without``; a project's ``without`` or ``known-bugs``):
#: ``burst-decay``, the ``burst`` regime (where two libraries' chunked float32 kernels lose
#: precision: a project that knows it declares it, the verdicts say so).
OPTIONAL: dict[str, str] = {
    "burst-decay": "the burst decay regime (strong decay then weak decay in one chunk)"}


def decay_regimes(without: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """The regimes a strategy draws: :data:`DECAY_REGIMES`, ``burst`` left out under
    ``burst-decay``; an unknown feature name is a ValueError listing :data:`OPTIONAL`."""
    unknown = set(without) - set(OPTIONAL)
    if unknown:
        raise ValueError(f"delta rule: unknown features {sorted(unknown)}; known: "
                         f"{sorted(OPTIONAL)}")
    return tuple(r for r in DECAY_REGIMES if not (r == "burst" and "burst-decay" in without))


#: How keys and the erase gate are drawn. ``independent``: i.i.d. normal keys, b in [0, 1];
#: ``correlated``: every key of a head near one shared direction (u + 0.3 n) and b in
#: [0.9, 1], so a chunk's (I + strictly-lower(b K K^T)) is far from the identity: a kernel
#: that inverts it one refinement short (a Newton-Schulz step skipped) errs 3-20x the float32
#: tolerance there and within it on independent keys (the independent mutant
#: ind-gdn-no-newton-refine).
KEY_LAYOUTS: tuple[str, ...] = ("independent", "correlated")

#: Strengths of the burst's strong decay (-g): a factor e^-5 per token up to e^-150.
BURST_STRENGTHS: tuple[float, ...] = (5.0, 30.0, 150.0)


@dataclasses.dataclass(frozen=True, kw_only=True)
class DeltaRuleCase(Case):
    """One chunked delta-rule (GDN-2 form) call and its vjp.

    Attributes:
      batch, seq_len: the sequences.
      key_heads, value_heads: heads of q/k/g/b and of v/w/state; ``value_heads`` a
        multiple of ``key_heads`` (value head j reads key head j // group).
      key_dim, value_dim: K and V (the state of a head is [K, V]).
      chunk_size: the kernel's chunk (a block: tokens per step of the chunked solve).
      documents: per batch row, the lengths of its documents (summing to seq_len); the
        state resets to zero at the first token of every document after the first.
      initial_state: whether an initial state is passed (it applies to each row's first
        document) and its gradient compared.
      qk_l2norm: q and k are L2-normalised inside the op (q_hat = scale q / sqrt(|q|^2 +
        1e-6)); without it k is drawn with norm ~1 (the delta rule is stable for
        b |k|^2 <= 2).
      decay: the regime of g (:data:`DECAY_REGIMES`); ``burst_strength``: -g of the burst.
      zero_chunk: a chunk index whose q, k and v are all zero, or None.
      keys: how k and b are drawn (:data:`KEY_LAYOUTS`).
      layout_chunk: the chunk the zero chunk and the burst are placed by, where it is not
        ``chunk_size`` (None: it is): a block variant (:func:`chunk_variants`) keeps the
        case's data and changes only the kernel's chunk.
    """

    batch: int
    seq_len: int
    key_heads: int = 1
    value_heads: int = 1
    key_dim: int = 128
    value_dim: int = 128
    chunk_size: int = 128
    documents: tuple[tuple[int, ...], ...] = ()
    initial_state: bool = False
    qk_l2norm: bool = True
    decay: str = "ordinary"
    burst_strength: float = 30.0
    zero_chunk: int | None = None
    layout_chunk: int | None = None
    keys: str = "independent"

    #: Data only: the seed, the decay, the keys, where zeros are and the documents (segment
    #: ids are an array argument of the kernel) change no compiled program.
    DYNAMIC_FIELDS: ClassVar[frozenset[str]] = frozenset(
        {"seed", "decay", "burst_strength", "zero_chunk", "documents", "layout_chunk",
         "keys"})

    def __post_init__(self) -> None:
        super().__post_init__()
        check_sizes(self, "batch", "seq_len", "key_heads", "value_heads", "key_dim",
                    "value_dim", "chunk_size")
        if self.layout_chunk is not None and self.layout_chunk < 1:
            raise ValueError(f"layout_chunk must be >= 1 or None, got {self.layout_chunk}")
        if self.value_heads % self.key_heads:
            raise ValueError(f"value_heads={self.value_heads} must be a multiple of "
                             f"key_heads={self.key_heads} (each key head serves a group)")
        if self.documents:
            if len(self.documents) != self.batch:
                raise ValueError(f"documents must give one tuple of lengths per batch row "
                                 f"({self.batch}), got {len(self.documents)}")
            for row, lengths in enumerate(self.documents):
                if min(lengths, default=0) < 1 or sum(lengths) != self.seq_len:
                    raise ValueError(f"documents[{row}] = {lengths}: lengths must be >= 1 "
                                     f"and sum to seq_len={self.seq_len}")
        if self.decay not in DECAY_REGIMES:
            raise ValueError(f"decay must be one of {DECAY_REGIMES}, got {self.decay!r}")
        if self.keys not in KEY_LAYOUTS:
            raise ValueError(f"keys must be one of {KEY_LAYOUTS}, got {self.keys!r}")
        if not self.burst_strength > 0:
            raise ValueError(f"burst_strength must be > 0 (-g of the burst), got "
                             f"{self.burst_strength}")
        if self.zero_chunk is not None and not 0 <= self.zero_chunk < self.data_chunks:
            raise ValueError(f"zero_chunk={self.zero_chunk} must name one of the "
                             f"{self.data_chunks} chunks")

    @property
    def chunks(self) -> int:
        """Chunks of the (padded) sequence."""
        return -(-self.seq_len // self.chunk_size)

    @property
    def data_chunk(self) -> int:
        """The chunk the data is laid out by (the zero chunk, the burst): ``layout_chunk``
        where given, else ``chunk_size``."""
        return self.layout_chunk or self.chunk_size

    @property
    def data_chunks(self) -> int:
        """Chunks of :attr:`data_chunk` tokens in the sequence."""
        return -(-self.seq_len // self.data_chunk)

    def segment_ids(self) -> np.ndarray:
        """int32 [batch, seq_len]: the document index of each token."""
        ids = np.zeros((self.batch, self.seq_len), np.int32)
        for row, lengths in enumerate(self.documents):
            ids[row] = np.repeat(np.arange(len(lengths), dtype=np.int32), lengths)
        return ids

    def shape_summary(self) -> str:
        """``q=(1,300,1,128) v=(1,300,2,128) chunk=128 docs=[[100, 200]] h0 l2 burst``."""
        docs = f" docs={[list(d) for d in self.documents]}" if self.documents else ""
        flags = "".join((" h0" if self.initial_state else "", " l2" if self.qk_l2norm else ""))
        decay = self.decay + (f"{self.burst_strength:g}" if self.decay == "burst" else "")
        zero = "" if self.zero_chunk is None else f" zero-chunk={self.zero_chunk}"
        zero += " correlated-keys" if self.keys == "correlated" else ""
        zero += "" if self.layout_chunk is None else f" data-chunk={self.layout_chunk}"
        return (f"q=({self.batch},{self.seq_len},{self.key_heads},{self.key_dim}) v=("
                f"{self.batch},{self.seq_len},{self.value_heads},{self.value_dim}) chunk="
                f"{self.chunk_size}{docs}{flags} {decay}{zero}")

    def log_decay(self, rng: np.random.Generator) -> np.ndarray:
        """g [batch, seq_len, key_heads, key_dim], every value < 0 (:data:`DECAY_REGIMES`)."""
        shape = (self.batch, self.seq_len, self.key_heads, self.key_dim)
        ordinary = -np.exp(rng.standard_normal(shape) * 0.39 - 1.0)
        if self.decay == "ordinary":
            return ordinary
        weak = -rng.uniform(1e-3, 0.05, shape)
        if self.decay == "weak":
            return weak
        # The burst's chunk: not the zero chunk (zero q, k, v there would hide it).
        chunk = int(rng.choice([c for c in range(self.data_chunks) if c != self.zero_chunk]
                               or [0]))
        start = chunk * self.data_chunk
        end = min(start + self.data_chunk, self.seq_len)
        burst_end = start + max(1, (end - start) // 4)
        g = ordinary
        g[:, start:burst_end] = -self.burst_strength * rng.uniform(0.9, 1.0,
                                                                   g[:, start:burst_end].shape)
        g[:, burst_end:end] = weak[:, burst_end:end]
        return g

    def materialize(self) -> dict[str, np.ndarray]:
        """q, k, v, g, b, w (and h0 where ``initial_state``) in the case's dtype, and the
        cotangents ``dout`` (of out) and ``dstate`` (of the final state)."""
        rng = self.rng()
        b_, l_, hk, hv, kd, vd = (self.batch, self.seq_len, self.key_heads,
                                  self.value_heads, self.key_dim, self.value_dim)
        q = rng.standard_normal((b_, l_, hk, kd))
        k = rng.standard_normal((b_, l_, hk, kd))
        spread = 1.0
        if self.keys == "correlated":
            k = rng.standard_normal((b_, 1, hk, kd)) + 0.3 * k
            spread = 1.09  # |u + 0.3 n|^2 ~ 1.09 K
        if not self.qk_l2norm:
            k /= np.sqrt(kd * spread)  # |k| ~ 1: the erase step b |k|^2 stays <= 2 (stable)
        v = rng.standard_normal((b_, l_, hv, vd))
        if self.zero_chunk is not None:
            span = slice(self.zero_chunk * self.data_chunk,
                         (self.zero_chunk + 1) * self.data_chunk)
            q[:, span] = k[:, span] = v[:, span] = 0.0
        arrays = {
            "q": q, "k": k, "v": v, "g": self.log_decay(rng),
            "b": rng.uniform(0.9 if self.keys == "correlated" else 0.0, 1.0,
                             (b_, l_, hk, kd)),
            "w": rng.uniform(0.0, 1.0, (b_, l_, hv, vd)),
            "dout": rng.standard_normal((b_, l_, hv, vd)),
            "dstate": rng.standard_normal((b_, hv, kd, vd)) * 0.1,
        }
        if self.initial_state:
            arrays["h0"] = rng.standard_normal((b_, hv, kd, vd)) * 0.1
        return {name: cast(x, self.dtype) for name, x in arrays.items()}
