"""Splash's benchmark hook: causal MHA through ``make_splash_mha`` (vmapped over batch)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax

from kernel_harness.core.backends import Backend
from kernel_harness.families.splash import kernel as _kernel
from kernel_harness.families.splash.cases import SplashCase
from kernel_harness.records.bench import Bench, Timed, attention_program

HEADS, HEAD_DIM, BLOCK = 4, 128, 128


def case_at(seq_len: int, dtype: str) -> SplashCase:
    """Causal self-attention, batch 1, 4 heads, head_dim 128, 128-blocks everywhere."""
    return SplashCase(dtype=dtype, seed=0, batch=1, q_heads=HEADS, kv_heads=HEADS,
                      q_len=seq_len, kv_len=seq_len, head_dim=HEAD_DIM, head_dim_v=HEAD_DIM,
                      masks=("causal(offset=0)",))


def program(impl: Callable[..., Any] | None, case: SplashCase, backend: Backend,
            mode: str) -> Timed:
    """The splash kernel for the case's mask and block sizes, forward or forward+vjp."""
    impl = impl or _kernel.make_splash_mha
    module = _kernel.splash_module(impl)
    kernel = impl(_kernel.kernel_mask(case), block_sizes=_kernel.block_sizes(case, module),
                  is_mqa=False, save_residuals=False, attn_logits_soft_cap=None,
                  head_shards=1, q_seq_shards=1, interpret=backend.pallas_interpret())

    def forward(q: Any, k: Any, v: Any) -> Any:
        return jax.vmap(lambda q1, k1, v1: kernel(q1, k1, v1, None, None))(q, k, v)

    return attention_program(forward, ("q", "k", "v"), mode)


BENCH = Bench(case_at=case_at, program=program,
              config=f"batch 1, {HEADS} heads, head_dim {HEAD_DIM}, causal, blocks {BLOCK}")
