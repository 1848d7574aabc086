"""gpu-decode's benchmark hook: one decode step (GQA) against a kv cache of the given
length; forward only (a decode kernel has no backward)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernel_harness.core.backends import Backend
from kernel_harness.families import gpu_common
from kernel_harness.families.gpu_decode import kernel as _kernel
from kernel_harness.families.gpu_decode.cases import DecodeCase
from kernel_harness.records.bench import Bench, Timed

Q_HEADS, KV_HEADS, HEAD_DIM, K_SPLITS = 32, 4, 64, 4


def case_at(seq_len: int, dtype: str) -> DecodeCase:
    """Batch 1, 32 query heads over 4 kv heads, head_dim 64, a cache of ``seq_len`` keys
    split into 4 (a power-of-two length of at least 64)."""
    return DecodeCase(dtype=dtype, seed=0, batch=1, q_heads=Q_HEADS, kv_heads=KV_HEADS,
                      q_len=1, kv_len=seq_len, head_dim=HEAD_DIM, block_h=16, block_k=32,
                      k_splits=K_SPLITS)


def program(impl: Callable[..., Any] | None, case: DecodeCase, backend: Backend,
            mode: str) -> Timed:
    """``decode(q, k, v, None, None, entry="gqa")``: the output alone."""
    if mode != "fwd":
        raise ValueError("gpu-decode has no backward; time it with --mode fwd")
    impl = impl or _kernel.decode
    kwargs = dict(entry=case.entry, sm_scale=None, block_h=case.block_h, block_k=case.block_k,
                  k_splits=case.k_splits, num_warps=case.num_warps,
                  num_stages=case.num_stages, interpret=backend.pallas_interpret(),
                  return_residuals=True, normalize_output=case.normalize_output)

    def step(a: Any) -> Any:
        out, _ = impl(a["q"], a["k"], a["v"], None, None, **kwargs)
        return out

    return Timed(fn=step, inputs=("q", "k", "v"), outputs=("out",))


BENCH = Bench(case_at=case_at, program=program, modes=frozenset({"fwd"}),
              config=f"decode step, batch 1, {Q_HEADS} q heads / {KV_HEADS} kv heads, "
              f"head_dim {HEAD_DIM}, k_splits {K_SPLITS}",
              context=gpu_common.kernel_context)
