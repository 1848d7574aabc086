"""gpu-paged's benchmark hook: one paged decode step over ``seq_len`` cached tokens;
forward only."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernel_harness.core.backends import Backend
from kernel_harness.families import gpu_common
from kernel_harness.families.gpu_paged import kernel as _kernel
from kernel_harness.families.gpu_paged.cases import PagedCase
from kernel_harness.records.bench import Bench, Timed

Q_HEADS, KV_HEADS, HEAD_DIM, PAGE, PAGES_PER_BLOCK = 32, 4, 64, 16, 4


def case_at(seq_len: int, dtype: str) -> PagedCase:
    """Batch 1, 32 query heads over 4 kv heads, head_dim 64, pages of 16 tokens, 4 pages
    per compute block, the row's length = ``seq_len`` (a power of two >= 64)."""
    if seq_len % PAGE:
        raise ValueError(f"gpu-paged bench: seq_len {seq_len} is not a multiple of {PAGE}")
    return PagedCase(dtype=dtype, seed=0, batch=1, q_heads=Q_HEADS, kv_heads=KV_HEADS,
                     head_dim=HEAD_DIM, page_size=PAGE, pages_per_seq=seq_len // PAGE,
                     lengths=(seq_len,), pages_per_compute_block=PAGES_PER_BLOCK)


def program(impl: Callable[..., Any] | None, case: PagedCase, backend: Backend,
            mode: str) -> Timed:
    """``paged_attention(q, k_pages, v_pages, block_tables, lengths)``."""
    if mode != "fwd":
        raise ValueError("gpu-paged has no backward; time it with --mode fwd")
    impl = impl or _kernel.paged_attention
    kwargs = dict(block_h=case.block_h, pages_per_compute_block=case.pages_per_compute_block,
                  k_splits=case.k_splits, num_warps=case.num_warps,
                  num_stages=case.num_stages, interpret=backend.pallas_interpret(),
                  attn_logits_soft_cap=case.soft_cap)
    names = ("q", "k_pages", "v_pages", "block_tables", "lengths")

    def step(a: Any) -> Any:
        return impl(*(a[n] for n in names), None, None, **kwargs)

    return Timed(fn=step, inputs=names, outputs=("out",))


BENCH = Bench(case_at=case_at, program=program, modes=frozenset({"fwd"}),
              config=f"paged decode step, batch 1, {Q_HEADS} q heads / {KV_HEADS} kv heads, "
              f"head_dim {HEAD_DIM}, pages of {PAGE}",
              context=gpu_common.kernel_context)
