"""flywheel-tpu-ragged-append's cases: the op's write (:mod:`kernel_harness.ops.
kv_cache_write`) as ``append_ragged`` takes it, with inactive sequences after the active
ones (``num_active``): their lengths, new rows and table rows are junk pointing into the
cache, and must be ignored."""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import strategies as st

from kernel_harness.ops.kv_cache_write.cases import KvWriteCase, kv_write_fields


@dataclasses.dataclass(frozen=True, kw_only=True)
class FlywheelAppendCase(KvWriteCase):
    """The op's write and ``inactive_seqs`` sequences past ``num_active``.

    Attributes:
      inactive_seqs: sequences after the active ones whose cu_seqlens, cache lengths and
        table rows are junk (plausible writes into pages the active sequences own).
    """

    inactive_seqs: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.inactive_seqs < 0:
            raise ValueError(f"inactive_seqs must be >= 0, got {self.inactive_seqs}")

    def materialize(self) -> dict[str, np.ndarray]:
        """The op's inputs, and the kernel's operands over every sequence slot: cu_seqlens
        growing by 1-3 junk rows per inactive sequence (up to k's last row), junk cache
        lengths and table rows of existing pages, ``num_active``."""
        inputs = super().materialize()
        rng, n = self.rng(7), self.inactive_seqs
        capacity = self.page_size * self.pages_per_seq
        cu = inputs["cu_new_lens"]
        junk_cu = np.minimum(cu[-1] + np.cumsum(rng.integers(1, 4, n)), self.rows)
        table = np.concatenate([inputs["block_table"],
                                rng.integers(0, self.total_pages, (n, self.pages_per_seq))])
        return {**inputs, "all_cu_new_lens": np.concatenate([cu, junk_cu]).astype(np.int32),
                "all_cache_lens": np.concatenate(
                    [inputs["cache_lens"], rng.integers(0, capacity - 3, n)]).astype(np.int32),
                "flat_block_table": table.reshape(-1).astype(np.int32),
                "num_active": np.asarray([self.num_seqs], np.int32)}


@st.composite
def flywheel_append_cases(draw: st.DrawFn) -> FlywheelAppendCase:
    """The op's fields (bfloat16, 128-token pages, head_dim 128 and 256, 1-16 kv heads, up
    to 4 sequences of up to 3 pages), then 0-2 inactive sequences."""
    fields = draw(kv_write_fields(page_sizes=(128,), kv_heads=(1, 2, 3, 16),
                                  head_dims=(128, 256), max_pages_per_seq=3))
    return FlywheelAppendCase(**fields, inactive_seqs=draw(st.integers(0, 2)))
