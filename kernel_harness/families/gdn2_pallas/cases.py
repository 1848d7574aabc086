"""Cases of the gdn2-pallas family: the delta-rule op within what gdn2-pallas 0.1.1 takes.

The library's ``KernelConfig(bt, bc, mb, ...)`` is the case's blocks: ``chunk_size`` is bt
(the chunk; bc = bt / 2, the library's only split) and ``micro_block`` is mb (the WY
solve's micro-block, dividing bc). Its limits: K = V = 128, one head count for q, k and v
(no grouped heads), seq_len a multiple of bt, no documents (no segment ids), no key
normalisation (q and k are used as given, times ``scale``).
"""

from __future__ import annotations

import dataclasses

from hypothesis import strategies as st

from kernel_harness.core.case import Arrays
from kernel_harness.ops.delta_rule.cases import BURST_STRENGTHS, DeltaRuleCase, decay_regimes
from kernel_harness.ops.delta_rule.relations import RELATIONS, state_continuity
from kernel_harness.ops.delta_rule.strategy import correlated_keys
from kernel_harness.records.relations import Draw, Relation, Variant

#: The kernels' head dimension (the library raises for any other).
HEAD_DIM = 128
#: Chunk sizes (bt) drawn: the library's KAGGLE_SMALL preset's 128, and 64 (the same
#: two-block split at half the size, cheaper to interpret). Its default 256 is not drawn:
#: interpret cost.
CHUNKS: tuple[int, ...] = (64, 128)
#: Micro-blocks (mb) drawn: the presets' 16, and 8 and 32 (any divisor of bc is accepted).
MICRO_BLOCKS: tuple[int, ...] = (8, 16, 32)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Gdn2Case(DeltaRuleCase):
    """A :class:`DeltaRuleCase` the library can take, plus its micro-block.

    Attributes:
      micro_block: ``KernelConfig.mb``, the WY solve's micro-block (divides chunk_size / 2).
    """

    micro_block: int = 16

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.chunk_size % 2 or (self.chunk_size // 2) % self.micro_block:
            raise ValueError(f"micro_block={self.micro_block} must divide chunk_size / 2 "
                             f"(chunk_size={self.chunk_size}: bt = 2 bc, bc % mb == 0)")
        if self.seq_len % self.chunk_size:
            raise ValueError(f"seq_len={self.seq_len} must be a multiple of chunk_size="
                             f"{self.chunk_size} (gdn2-pallas takes whole chunks only)")
        if self.documents:
            raise ValueError("documents: gdn2-pallas has no segment ids (one document per row)")
        if self.qk_l2norm:
            raise ValueError("qk_l2norm: gdn2-pallas does not normalise q and k")
        if self.key_heads != self.value_heads:
            raise ValueError(f"key_heads={self.key_heads} must equal value_heads="
                             f"{self.value_heads} (gdn2-pallas has no grouped heads)")

    def shape_summary(self) -> str:
        """The op's summary plus ``mb=16``."""
        return f"{super().shape_summary()} mb={self.micro_block}"


@st.composite
def gdn2_cases(draw: st.DrawFn, *, dtypes: tuple[str, ...] = ("float32", "bfloat16"),
               max_chunks: int = 3, max_batch: int = 2,
               without: frozenset[str] = frozenset()) -> Gdn2Case:
    """Whole chunks (1..``max_chunks``), 1..``max_batch`` rows, one or two heads, an initial
    state or not, every decay regime, a chunk of zeros, keys correlated or not (the op's
    :func:`~kernel_harness.ops.delta_rule.strategy.correlated_keys`); shrinks towards one
    chunk of 64, ordinary decay, float32. ``without``: the op's optional features not drawn."""
    regimes = decay_regimes(without)
    chunk = draw(st.sampled_from(CHUNKS), label="chunk_size")
    chunks = draw(st.integers(1, max_chunks), label="chunks")
    heads = draw(st.sampled_from((1, 2)), label="heads")
    zero = draw(st.one_of(st.none(), st.integers(0, chunks - 1)), label="zero_chunk") \
        if chunks > 1 else None
    return Gdn2Case(
        dtype=draw(st.sampled_from(dtypes), label="dtype"),
        seed=draw(st.integers(0, 2**31 - 1), label="seed"),
        batch=draw(st.integers(1, max_batch), label="batch"), seq_len=chunk * chunks,
        key_heads=heads, value_heads=heads, key_dim=HEAD_DIM, value_dim=HEAD_DIM,
        chunk_size=chunk, qk_l2norm=False,
        micro_block=draw(st.sampled_from([m for m in MICRO_BLOCKS if (chunk // 2) % m == 0]),
                         label="micro_block"),
        initial_state=draw(st.booleans(), label="initial_state"),
        decay=(decay := draw(st.sampled_from(regimes), label="decay")),
        burst_strength=draw(st.sampled_from(BURST_STRENGTHS), label="burst_strength"),
        zero_chunk=zero, keys=draw(correlated_keys(decay)))


def block_variants(case: Gdn2Case) -> st.SearchStrategy[Gdn2Case]:
    """The ``Metamorphic.block_variants`` hook: the same data with another (bt, mb) the
    library takes for this length (the zero chunk and the burst stay where the case put
    them: ``layout_chunk``)."""
    layout = case.data_chunk
    pairs = [(c, m) for c in CHUNKS for m in MICRO_BLOCKS
             if case.seq_len % c == 0 and (c // 2) % m == 0]
    return st.sampled_from(pairs).map(lambda p: dataclasses.replace(
        case, chunk_size=p[0], micro_block=p[1],
        layout_chunk=None if p[0] == layout else layout))


def continuity_at_chunk_edges(case: Gdn2Case, inputs: Arrays, draw: Draw) -> Variant | None:
    """The op's state-continuity with the split on a chunk edge (both calls then take
    whole chunks, as the library requires); None for a one-chunk case."""
    if case.seq_len < 2 * case.chunk_size:
        return None
    seen = []

    def on_edges(strategy: st.SearchStrategy, label: str = "") -> object:
        if label == "split token":
            seen.append(label)
            strategy = st.sampled_from(range(case.chunk_size, case.seq_len, case.chunk_size))
        return draw(strategy, label=label)

    variant = state_continuity(case, inputs, on_edges)
    if not seen:  # the op's relation no longer draws its split by this label
        raise RuntimeError("state-continuity drew no 'split token': update gdn2-pallas's "
                           "continuity_at_chunk_edges")
    return variant


def _relation(name: str) -> Relation:
    return next(r for r in RELATIONS if r.name == name)


#: The op's relations the library can take: state-continuity split on chunk edges and
#: linear-in-v (documents-independent needs documents, which the library has not).
GDN2_RELATIONS: tuple[Relation, ...] = (
    dataclasses.replace(_relation("state-continuity"), variant=continuity_at_chunk_edges,
                        doc="The chunks after a chunk edge, run with the state there as "
                        "the initial state, give the whole run's outputs and gradients of "
                        "those tokens and its final state."),
    _relation("linear-in-v"),
)
