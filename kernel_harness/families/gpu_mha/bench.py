"""gpu-mha's benchmark hook: causal MHA through the Triton ``mha`` (runs on ``gpu``, or
interpreted on the CPU with ``interpret``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernel_harness.core.backends import Backend
from kernel_harness.families import gpu_common
from kernel_harness.families.gpu_mha import kernel as _kernel
from kernel_harness.families.gpu_mha.cases import MhaCase
from kernel_harness.records.bench import Bench, Timed, attention_program

HEADS, HEAD_DIM, BLOCK = 4, 64, 64


def case_at(seq_len: int, dtype: str) -> MhaCase:
    """Causal self-attention, batch 1, 4 heads, head_dim 64, 64-blocks (clamped to the
    length)."""
    blocks = {n: BLOCK for n in ("block_q", "block_k", "block_q_dkv", "block_kv_dkv",
                                 "block_q_dq", "block_kv_dq")}
    return MhaCase(dtype=dtype, seed=0, batch=1, q_heads=HEADS, kv_heads=HEADS, q_len=seq_len,
                   kv_len=seq_len, head_dim=HEAD_DIM, is_causal=True, **blocks)


def program(impl: Callable[..., Any] | None, case: MhaCase, backend: Backend,
            mode: str) -> Timed:
    """``mha(q, k, v, None, causal=True)`` with the case's blocks, forward or forward+vjp."""
    impl = impl or _kernel.mha
    kwargs = dict(sm_scale=case.effective_scale, causal=case.is_causal,
                  block_sizes=_kernel.block_sizes(case), num_warps=case.num_warps,
                  num_stages=case.num_stages, interpret=backend.pallas_interpret())

    def forward(q: Any, k: Any, v: Any) -> Any:
        return impl(q, k, v, None, **kwargs)

    return attention_program(forward, ("q", "k", "v"), mode)


BENCH = Bench(case_at=case_at, program=program,
              config=f"batch 1, {HEADS} heads, head_dim {HEAD_DIM}, causal, blocks {BLOCK}",
              context=gpu_common.kernel_context)
