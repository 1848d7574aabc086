"""SDPA's benchmark hook: causal MHA, the seed's memory-table baseline (XLA materializes
the (q_len, kv_len) score matrix)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernel_harness.core.backends import Backend
from kernel_harness.families.sdpa.cases import SdpaCase
from kernel_harness.families.sdpa.kernel import xla_sdpa
from kernel_harness.records.bench import Bench, Timed, attention_program

HEADS, HEAD_DIM = 4, 128


def case_at(seq_len: int, dtype: str) -> SdpaCase:
    """Causal self-attention, batch 1, 4 heads, head_dim 128."""
    return SdpaCase(dtype=dtype, seed=0, batch=1, q_len=seq_len, kv_len=seq_len, q_heads=HEADS,
                    kv_heads=HEADS, head_dim=HEAD_DIM, is_causal=True)


def program(impl: Callable[..., Any] | None, case: SdpaCase, backend: Backend,
            mode: str) -> Timed:
    """``impl(query, key, value, is_causal=True)`` (default scale), forward or forward+vjp."""
    impl = impl or xla_sdpa

    def forward(query: Any, key: Any, value: Any) -> Any:
        return impl(query, key, value, None, None, scale=None, is_causal=case.is_causal,
                    query_seq_lengths=None, key_value_seq_lengths=None,
                    local_window_size=None)

    return attention_program(forward, ("query", "key", "value"), mode)


BENCH = Bench(case_at=case_at, program=program,
              config=f"batch 1, {HEADS} heads, head_dim {HEAD_DIM}, causal")
