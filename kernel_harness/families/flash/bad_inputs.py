"""flash's invalid configurations (``kernel-harness bad-input flash``; see
:mod:`kernel_harness.records.bad_input`)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from kernel_harness.records.bad_input import BadInput


def bad_inputs() -> list[BadInput]:
    """Its invalid configurations, each with the message a clear error matches."""
    from jax.experimental.pallas.ops.tpu import flash_attention as fa

    from kernel_harness.core import compat

    params = compat.tpu_interpret_params(detect_races=False, uninitialized_memory="zero",
                                         num_cores_or_threads=1)

    def x(b: int, n: int, d: int = 128) -> jax.Array:
        return jnp.ones((b, 1, n, d), jnp.float32)

    def blocks(**kw: int) -> Any:
        base = dict(block_b=1, block_q=128, block_k_major=128, block_k=128,
                    block_q_major_dkv=128, block_k_major_dkv=128, block_k_dkv=128,
                    block_q_dkv=128, block_k_major_dq=128, block_k_dq=128, block_q_dq=128)
        return fa.BlockSizes(**{**base, **kw})

    def run(*args: Any, **kw: Any) -> Any:
        kw.setdefault("block_sizes", blocks())
        with compat.forced_tpu_interpret_mode(params):
            return jax.block_until_ready(fa.flash_attention(*args, **kw))

    ids = lambda b, n: jnp.zeros((b, n), jnp.int32)  # noqa: E731
    return [
        BadInput("block_k_major does not divide kv_len",
                 lambda: run(x(1, 512), x(1, 512), x(1, 512),
                             block_sizes=blocks(block_k_major=384)),
                 r"divisible by block_k_major"),
        BadInput("block_k does not divide block_k_major",
                 lambda: run(x(1, 768), x(1, 768), x(1, 768),
                             block_sizes=blocks(block_k_major=384, block_k=256)),
                 r"block_k=256 should divide block_k_major=384"),
        BadInput("q segment ids of the wrong shape",
                 lambda: run(x(1, 256), x(1, 256), x(1, 256),
                             segment_ids=fa.SegmentIds(q=ids(1, 128), kv=ids(1, 256))),
                 r"Q segment ids shape mismatch"),
        BadInput("kv segment ids of the wrong shape",
                 lambda: run(x(1, 256), x(1, 256), x(1, 256),
                             segment_ids=fa.SegmentIds(q=ids(1, 256), kv=ids(1, 384))),
                 r"KV segment ids shape mismatch"),
        BadInput("bias of the wrong shape",
                 lambda: run(x(1, 256), x(1, 256), x(1, 256), ab=jnp.ones((1, 1, 256, 128))),
                 r"bias shape mismatch"),
        BadInput("k head_dim differs from q's",
                 lambda: run(x(1, 256), x(1, 256, 64), x(1, 256)),
                 r"dimension mismatch"),
        BadInput("k and v lengths differ",
                 lambda: run(x(1, 256), x(1, 256), x(1, 384)),
                 r"sequence length mismatch"),
    ]
