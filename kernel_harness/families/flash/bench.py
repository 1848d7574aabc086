"""Flash's benchmark hook: causal MHA through the TPU ``flash_attention``."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from jax.experimental.pallas.ops.tpu import flash_attention as _fa

from kernel_harness.core.backends import Backend
from kernel_harness.families.flash import kernel as _kernel
from kernel_harness.families.flash.cases import FlashCase
from kernel_harness.records.bench import Bench, Timed, attention_program

HEADS, HEAD_DIM, BLOCK = 4, 128, 128
_BLOCKS = ("block_q", "block_k_major", "block_k", "block_q_major_dkv", "block_k_major_dkv",
           "block_k_dkv", "block_q_dkv", "block_k_major_dq", "block_k_dq", "block_q_dq")


def case_at(seq_len: int, dtype: str) -> FlashCase:
    """Causal self-attention, batch 1, 4 heads, head_dim 128, 128-blocks everywhere."""
    return FlashCase(dtype=dtype, seed=0, batch=1, q_heads=HEADS, kv_heads=HEADS,
                     q_len=seq_len, kv_len=seq_len, head_dim=HEAD_DIM, is_causal=True,
                     scale=1 / math.sqrt(HEAD_DIM), block_b=1,
                     **{name: BLOCK for name in _BLOCKS})


def program(impl: Callable[..., Any] | None, case: FlashCase, backend: Backend,
            mode: str) -> Timed:
    """``flash_attention(q, k, v, causal=True)`` with the case's blocks, fwd or fwd+vjp
    (traced under the backend's forced interpret mode: see :data:`BENCH` context)."""
    impl = impl or _kernel.flash_attention
    blocks = _fa.BlockSizes(block_b=case.block_b, **{n: getattr(case, n) for n in _BLOCKS})

    def forward(q: Any, k: Any, v: Any) -> Any:
        return impl(q, k, v, None, None, causal=case.is_causal,
                    sm_scale=case.effective_scale, block_sizes=blocks)

    return attention_program(forward, ("q", "k", "v"), mode)


BENCH = Bench(case_at=case_at, program=program,
              config=f"batch 1, {HEADS} heads, head_dim {HEAD_DIM}, causal, blocks {BLOCK}",
              context=lambda backend: backend.forcing_interpret())
