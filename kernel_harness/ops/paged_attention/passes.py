"""Ragged paged attention in passes: the case vocabulary of the kernels that take a batch of
sequences as decode steps, prefill chunks of one static length and a mix of both (the
``distribution`` of tpu-inference's ragged paged attention v3 and MLA v2), write the new
tokens' keys into the paged cache and attend over it.

:class:`PassesCase` holds what every such kernel's case says (sequences, passes, padding,
page geometry, window, cap, scale) and the arrays
that follow from it; :func:`draw_passes` draws them; :func:`passes_events` names what a
case reaches (:data:`PASSES_MODES`, what every such kernel reaches); :data:`SEED_LAYOUTS`
are the sequences of their seed cases. What the passes mean: :mod:`.semantics`. A family
adds its heads, dimensions, blocks and cache layout.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, ClassVar

import ml_dtypes
import numpy as np
from hypothesis import strategies as st

from kernel_harness.core.case import cast
from kernel_harness.ops.paged_attention.sequences import RaggedBatch, page_slots

#: The modes :func:`passes_events` names that every kernel of the passes reaches.
PASSES_MODES = frozenset({
    "decode-pass", "prefill-pass", "mixed-pass", "mixed-prefill-decode", "multi-seq",
    "multi-kv-block", "sliding-window", "window-cuts-keys", "soft-cap", "padding-q-rows",
    "num-seqs-below-max", "float32"})

#: The sequences of the passes kernels' seed cases, one layout for every kernel (a family
#: adds its dtype, seed, heads and blocks): all three passes in one call (two decode
#: steps, two prefill chunks of 5, a mixed pair; kv lengths on and off 8-token page edges,
#: a padding sequence slot and padding rows, a window of 12, sm_scale 0.5, large logits);
#: and a mixed call (a chunk of 3 after 27 cached tokens, a decode step, a 16-token prefill
#: from an empty cache, 16-token pages, a soft cap of 20).
SEED_LAYOUTS: tuple[Mapping[str, Any], ...] = (
    MappingProxyType(dict(
        q_lens=(1, 1, 5, 5, 1, 9), decode_seqs=2, kv_lens=(7, 24, 5, 17, 32, 16),
        prefill_seqs=2, chunk_prefill_size=5, max_num_seqs=7, max_tokens=24, page_size=8,
        pages_per_seq=4, sliding_window=12, sm_scale=0.5, logit_scale=4.0)),
    MappingProxyType(dict(
        q_lens=(3, 1, 16), kv_lens=(30, 9, 16), max_num_seqs=3, max_tokens=22,
        page_size=16, pages_per_seq=2, soft_cap=20.0)),
)


def align(x: int, a: int) -> int:
    """``x`` rounded up to a multiple of ``a``."""
    return -(-x // a) * a


def lanes(dim: int) -> int:
    """``dim`` padded to whole 128-lane tiles (how the kernels lay out a head dimension)."""
    return align(dim, 128)


@dataclasses.dataclass(frozen=True, kw_only=True)
class PassesCase(RaggedBatch):
    """One call over ``num_seqs`` active sequences (:class:`~.sequences.RaggedBatch`) in up
    to three passes.

    Attributes:
      decode_seqs: the first ``decode_seqs`` sequences form the decode pass (q_len 1 each).
      prefill_seqs: the next ones form the prefill pass (q_len == ``chunk_prefill_size``
        each); the rest go to the mixed pass.
      chunk_prefill_size: the prefill pass's static query length (None: no prefill pass).
    """

    decode_seqs: int = 0
    prefill_seqs: int = 0
    chunk_prefill_size: int | None = None

    #: Lengths, passes and data are operands; everything else selects the program.
    DYNAMIC_FIELDS: ClassVar[frozenset[str]] = frozenset(
        {"seed", "q_lens", "kv_lens", "decode_seqs", "prefill_seqs", "logit_scale"})

    def __post_init__(self) -> None:
        super().__post_init__()
        d, p = self.decode_seqs, self.prefill_seqs
        if d < 0 or p < 0 or d + p > self.num_seqs:
            raise ValueError("decode_seqs + prefill_seqs must be within the sequences")
        if any(q != 1 for q in self.q_lens[:d]):
            raise ValueError("the decode pass's sequences must have q_len 1")
        if p and any(q != self.chunk_prefill_size for q in self.q_lens[d:d + p]):
            raise ValueError("the prefill pass's sequences must have q_len == "
                             "chunk_prefill_size")

    def pass_bounds(self) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int]]:
        """(first, end) sequence of the decode, prefill and mixed passes."""
        d, p, n = (int(x) for x in self.distribution())
        return (0, d), (d, p), (p, n)

    def distribution(self) -> np.ndarray:
        """int32 [3]: ends of the decode, prefill and mixed passes' sequences."""
        d, p = self.decode_seqs, self.prefill_seqs
        return np.asarray([d, d + p, self.num_seqs], np.int32)

    def new_tokens(self) -> list[tuple[int, int, int]]:
        """(row of the new keys, page, slot) of every query token (:func:`new_token_slots`
        over this case's page table)."""
        return new_token_slots(self.page_table(), self.q_lens, self.kv_lens, self.page_size)

    def operands(self) -> dict[str, np.ndarray]:
        """The scalar operands: kv_lens, page_indices (flat), cu_q_lens, distribution."""
        return {"kv_lens": self.kv_lens_array(), "page_indices": self.page_table().reshape(-1),
                "cu_q_lens": self.cu_q_lens(), "distribution": self.distribution()}


def new_token_slots(table: np.ndarray, q_lens: Sequence[int], kv_lens: Sequence[int],
                    page_size: int) -> list[tuple[int, int, int]]:
    """(row of the new keys, page, slot) of every query token: sequence i's j-th token
    (row sum(q_lens[:i]) + j) lands at position kv_len - q_len + j of its ``table`` row
    (exported scripts embed this source)."""
    found, row = [], 0
    for i, q_len in enumerate(q_lens):
        pages, slots = page_slots(table[i], kv_lens[i], page_size)
        for pos in range(kv_lens[i] - q_len, kv_lens[i]):
            found.append((row, int(pages[pos]), int(slots[pos])))
            row += 1
    return found


@st.composite
def draw_passes(draw: st.DrawFn, *, page_size: int, pages_per_seq: int, max_seqs: int = 4
                ) -> dict[str, Any]:
    """:class:`PassesCase` 's sequence fields: 1-``max_seqs`` sequences ordered as the
    passes take them (decode steps, prefill chunks of one static length, a mix of both),
    kv_len on, before and after page edges, 0-2 padding sequence slots and 0-5 padding
    rows. Shrinks towards one sequence in the mixed pass."""
    capacity = page_size * pages_per_seq
    edges = [e + d for e in range(page_size, capacity + 1, page_size) for d in (-1, 0, 1)]

    def kv_len(at_least: int) -> int:
        near = [e for e in edges if at_least <= e <= capacity] or [capacity]
        return draw(st.one_of(st.integers(at_least, capacity), st.sampled_from(near)))

    decode = draw(st.integers(0, max_seqs))
    chunk = draw(st.sampled_from((None, 2, 5, 8)))
    if chunk is not None and chunk > capacity:
        chunk = None
    prefill = 0 if chunk is None else draw(st.integers(0, max_seqs - decode))
    mixed = draw(st.integers(0 if decode + prefill else 1, max_seqs - decode - prefill))
    seqs = [(1, kv_len(1)) for _ in range(decode)]
    seqs += [(chunk, kv_len(chunk)) for _ in range(prefill)]
    for _ in range(mixed):
        kv = kv_len(1)
        seqs.append((draw(st.sampled_from((1, kv, max(1, kv // 2)))), kv))
    q_lens, kv_lens = (tuple(x) for x in zip(*seqs, strict=True))
    return dict(q_lens=q_lens, kv_lens=kv_lens, decode_seqs=decode, prefill_seqs=prefill,
                chunk_prefill_size=chunk, max_num_seqs=len(seqs) + draw(st.integers(0, 2)),
                max_tokens=sum(q_lens) + draw(st.integers(0, 5)))


def passes_events(case: PassesCase) -> list[str]:
    """What every such case reaches: the passes used, padding, pages, window, cap, large
    logits, the dtype."""
    (_, d), (_, p), _ = case.pass_bounds()
    mixed = case.q_lens[p:]
    ev = [case.dtype]
    ev += [name for name, on in (
        ("decode-pass", d > 0), ("prefill-pass", p > d), ("mixed-pass", bool(mixed)),
        ("mixed-prefill-decode", 1 in mixed and any(q > 1 for q in mixed)),
        ("multi-seq", case.num_seqs > 1),
        ("num-seqs-below-max", case.num_seqs < case.max_num_seqs),
        ("padding-q-rows", case.total_tokens < case.max_tokens),
        ("kv-len-mid-page", any(kv % case.page_size for kv in case.kv_lens)),
        ("soft-cap", case.soft_cap is not None),
        ("large-logits", case.logit_scale > 1),
        ("sliding-window", case.sliding_window is not None),
        ("window-cuts-keys", case.sliding_window is not None
         and any(kv > case.sliding_window for kv in case.kv_lens)),
    ) if on]
    return ev


def effective_q(q: np.ndarray, q_scale: float | None, cache_dtype: str) -> np.ndarray:
    """float32 queries as a kernel with a quantized cache uses them: with ``q_scale``,
    q / q_scale clipped to ``cache_dtype``'s range, rounded to it, times q_scale
    (q_scale is a power of two: exact); without, q itself (exported scripts embed this
    source)."""
    q = np.asarray(q, np.float32)
    if q_scale is None:
        return q
    top = float(ml_dtypes.finfo(cache_dtype).max)
    quantized = cast(np.clip(q / q_scale, -top, top), cache_dtype)
    return quantized.astype(np.float32) * q_scale
