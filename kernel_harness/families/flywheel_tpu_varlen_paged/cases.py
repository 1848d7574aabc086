"""Cases of flywheel-tpu's varlen attention over a paged cache (``flash_attn_varlen_func``
with ``block_table``) in the ragged paged op's vocabulary
(:class:`~kernel_harness.ops.paged_attention.sequences.RaggedBatch`), and the strategy:
the op's ragged draw (:func:`~kernel_harness.families.tpu_ragged_paged.cases.ragged_cases`)
at the library's geometry (bfloat16, 128-token pages, 1-3 pages a sequence).

The call: ``max_num_seqs`` is the library's batch and ``num_seqs`` its ``num_active``;
padding query rows and inactive sequences' slots hold junk the kernel must ignore.
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import numpy as np
from hypothesis import strategies as st

from kernel_harness.core.case import cast, check_heads, check_logit_scale
from kernel_harness.families.flywheel_tpu import merged_cache
from kernel_harness.families.tpu_ragged_paged.cases import ragged_cases
from kernel_harness.ops.paged_attention.sequences import RaggedBatch

#: The library's page size (``PAGE_SIZE_MULTIPLE``; larger multiples are not drawn).
PAGE_SIZE = 128
#: What the cache slots no active sequence owns hold: ``masked`` K = 0 and V = +-1e3
#: (a leak shows as a large error), ``nan`` NaN in K and V (memory never written).
PAST_LENGTH = ("masked", "nan")
#: Features a kernel may lack (``--without``); the decode kernel's known bug is this one.
OPTIONAL: dict[str, str] = {
    "nan-past-lengths": "the cache slots no active sequence owns hold finite values (no "
                        "NaN): drawn K = 0, V = +-1e3 there only"}
#: The library's tiles pinned by ``block_sizes`` (block_q, block_kv, block_q_compute,
#: block_kv_compute): what block-size invariance draws against its own choice (None).
BLOCKS: tuple[tuple[int, int, int, int], ...] = (
    (128, 128, 64, 128), (256, 128, 128, 128), (128, 256, 64, 128))


@dataclasses.dataclass(frozen=True, kw_only=True)
class FlywheelVarlenPagedCase(RaggedBatch):
    """One ``flash_attn_varlen_func`` call over the merged paged cache.

    Attributes:
      q_heads, kv_heads, head_dim: q is [q_heads, max_tokens, head_dim] (head-major).
      causal: bottom-right per sequence (False: every query sees its sequence's keys).
      sm_scale: the softmax scale applied; default_scale: the call passes None (the
        library's 1/sqrt(head_dim), which ``sm_scale`` then equals).
      past_length: what the slots no active sequence owns hold (:data:`PAST_LENGTH`).
      blocks: the ``block_sizes`` pinned (:data:`BLOCKS`), or None (the library's).
    """

    q_heads: int
    kv_heads: int
    head_dim: int = 128
    causal: bool = True
    default_scale: bool = False
    past_length: str = "masked"
    blocks: tuple[int, int, int, int] | None = None

    MIN_Q_LEN: ClassVar[int] = 0
    DYNAMIC_FIELDS: ClassVar[frozenset[str]] = RaggedBatch.DYNAMIC_FIELDS | {"past_length"}

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.dtype != "bfloat16":
            raise ValueError("flywheel-tpu's paged varlen attention is bfloat16 only")
        check_heads(self)
        if self.page_size != PAGE_SIZE or self.head_dim % 128:
            raise ValueError(f"page_size must be {PAGE_SIZE} and head_dim a multiple of 128")
        if self.default_scale and not math.isclose(self.sm_scale, self.head_dim**-0.5):
            raise ValueError("default_scale needs sm_scale == 1 / sqrt(head_dim)")
        if self.past_length not in PAST_LENGTH:
            raise ValueError(f"past_length must be one of {PAST_LENGTH}")
        if self.blocks is not None and self.blocks not in BLOCKS:
            raise ValueError(f"blocks must be None or one of {BLOCKS}")
        check_logit_scale(self.logit_scale)

    @property
    def window_left(self) -> int | None:
        """``window_size[0]``: keys a query sees before its own (sliding_window - 1)."""
        return None if self.sliding_window is None else self.sliding_window - 1

    def shape_summary(self) -> str:
        return (f"q=({self.q_heads},{self.max_tokens},{self.head_dim}) kv_cache=("
                f"{self.total_pages},{self.page_size},{2 * self.kv_heads},{self.head_dim}) "
                f"seqs={self.num_seqs}/{self.max_num_seqs} q_lens={list(self.q_lens)} "
                f"kv_lens={list(self.kv_lens)}")

    def materialize(self) -> dict[str, np.ndarray]:
        """q [q_heads, max_tokens, head_dim] ~N(0, logit_scale^2) (unscaled; padding rows
        hold data too), the merged cache (slots no active sequence owns poisoned by
        :attr:`past_length`), cu_seqlens_q, seqused_k, block_table (junk past the active
        sequences) and num_active [1]."""
        rng = self.rng()
        q = rng.standard_normal((self.q_heads, self.max_tokens, self.head_dim))
        shape = (self.kv_heads, self.total_pages, self.page_size, self.head_dim)
        kv = merged_cache.poisoned_pages(rng, shape, self.owned_slots(),
                                         nan=self.past_length == "nan")
        return {"q": cast(q * self.logit_scale, self.dtype), "kv_cache": cast(kv, self.dtype),
                "cu_seqlens_q": self.cu_q_lens(), "seqused_k": self.kv_lens_array(),
                "block_table": self.page_table(),
                "num_active": np.asarray([self.num_seqs], np.int32)}


@st.composite
def flywheel_varlen_paged_cases(draw: st.DrawFn, *, without: frozenset[str] = frozenset(),
                                max_seqs: int = 4) -> FlywheelVarlenPagedCase:
    """Valid cases: the op's ragged draw (1-4 active sequences of decode steps, prefill
    chunks and sequences without queries, kv lengths on and next to page edges, 0-2
    inactive sequences past num_active, 0-5 padding rows, shuffled pages, 1-4 kv heads in
    groups of 1, 2 or 4, windows, soft caps) at 128-token pages over 1-3 pages, plus the
    library's knobs: causal or not, its default or an explicit scale, logits 1x-16x, and
    NaN in the slots no sequence owns (unless ``without`` nan-past-lengths)."""
    base = draw(ragged_cases(dtypes=("bfloat16",), max_seqs=max_seqs, without=frozenset(
        {"sm-scale"}), page_sizes=(PAGE_SIZE,), pages_per_seq=(1, 3)))
    fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(RaggedBatch)}
    default_scale = draw(st.booleans())
    fields["sm_scale"] = (1.0 / math.sqrt(base.head_dim) if default_scale
                          else draw(st.sampled_from((0.05, 0.3))))
    fields["logit_scale"] = draw(st.sampled_from((1.0, 1.0, 4.0, 16.0)))
    return FlywheelVarlenPagedCase(
        **fields, q_heads=base.q_heads, kv_heads=base.kv_heads, head_dim=base.head_dim,
        default_scale=default_scale, causal=draw(st.sampled_from((True, True, False))),
        past_length="nan" if base.poison and "nan-past-lengths" not in without else "masked")
