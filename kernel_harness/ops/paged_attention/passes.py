"""Ragged paged attention in passes: the case vocabulary of the kernels that take a batch of
sequences as decode steps, prefill chunks of one static length and a mix of both (the
``distribution`` of tpu-inference's ragged paged attention v3 and MLA v2), write the new
tokens' keys into the paged cache and attend over it.

:class:`PassesCase` holds what every such kernel's case says (sequences, passes, padding,
page geometry, window, cap, scale) and the arrays
that follow from it; :func:`draw_passes` draws them; :func:`passes_events` names what a
case reaches. A family adds its heads, dimensions, blocks and cache layout.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, ClassVar

import ml_dtypes
import numpy as np
from hypothesis import strategies as st

from kernel_harness.core.case import cast
from kernel_harness.ops.paged_attention.sequences import RaggedBatch, page_slots

#: The ragged paged attention op with a cache update, as every kernel of it (tpu-inference's
#: rpa v3, its head-dim-64 variant, MLA v2) is checked: the lines each family's contract
#: starts from (its own layout of the cache, blocks and findings follow).
SEMANTICS = """\
- Sequence i < distribution[2] owns query rows cu_q_lens[i]:cu_q_lens[i+1] (1 <= q_len <=
  kv_len) and its first kv_lens[i] cache tokens; its queries are its LAST q_len positions.
  Token t of the sequence is slot t % page_size of page page_indices[i*pages_per_seq +
  t // page_size].
- The call first writes the new tokens (row j of the sequence's queries) into the cache at
  positions kv_len - q_len + j, then attends over the updated cache. The returned cache is
  compared to the expected one EXACTLY (every slot: owned, unowned, padding pages), unless
  the family names a kind of slot it may leave.
- Query j sees key t iff t <= its position and, with sliding_window w, t > position - w
  (causal bottom-right over each sequence's own lengths). Logits: sm_scale * q.k, then
  soft_cap * tanh(./soft_cap), then the mask; the attention op's softmax in float32.
- distribution = (d, p, n): sequences [0, d) run in the decode pass (q_len 1 each),
  [d, p) in the prefill pass (q_len == chunk_prefill_size each; only with a chunk size),
  [p, n) in the mixed pass.
- Padding: rows of out at or past cu_q_lens[n] are outside the contract (excluded); slots
  past n of kv_lens, cu_q_lens and page_indices hold junk the kernel must ignore.
"""
#: The op's quantized cache, for the kernels that take one (rpa v3 and its head-dim-64
#: variant; not MLA v2).
QUANTIZED = """\
- Quantized caches: kv_dtype float8_e4m3fn with k_scale/v_scale (the real K is the stored
  one times k_scale; V likewise) and q_scale (q / q_scale rounded to fp8 inside the kernel,
  the logits multiplied back; drawn as a power of two). The reference attends with the
  dequantized K/V and q quantized the same way; the cache stays exact.
"""


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
