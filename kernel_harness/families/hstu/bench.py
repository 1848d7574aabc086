"""HSTU's benchmark hook: causal pointwise attention through ``hstu_attention``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernel_harness.core.backends import Backend
from kernel_harness.kernels.hstu.api import hstu_attention
from kernel_harness.ops.pointwise_attention.cases import BLOCK_FIELDS, HstuCase
from kernel_harness.records.bench import Bench, Timed, attention_program

HEADS, HEAD_DIM = 4, 128


def case_at(seq_len: int, dtype: str) -> HstuCase:
    """Causal, batch 1, 4 heads, head_dim 128, the kernel's default blocks."""
    return HstuCase(dtype=dtype, seed=0, batch=1, q_heads=HEADS, head_dim=HEAD_DIM,
                    q_len=seq_len, kv_len=seq_len, mask="causal")


def program(impl: Callable[..., Any] | None, case: HstuCase, backend: Backend,
            mode: str) -> Timed:
    """``hstu_attention(case.mask, q, k, v)``, forward or forward+vjp."""
    impl = impl or hstu_attention
    kwargs = {name: getattr(case, name) for name in BLOCK_FIELDS}
    kwargs.update(sliding_window_size=case.window, scale=case.scale,
                  interpret=backend.pallas_interpret())

    def forward(q: Any, k: Any, v: Any) -> Any:
        return impl(case.mask, q, k, v, **kwargs)

    return attention_program(forward, ("q", "k", "v"), mode)


BENCH = Bench(case_at=case_at, program=program,
              config=f"batch 1, {HEADS} heads, head_dim {HEAD_DIM}, causal, default blocks")
