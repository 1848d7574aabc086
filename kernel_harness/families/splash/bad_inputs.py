"""splash's invalid configurations (``kernel-harness bad-input splash``; see
:mod:`kernel_harness.records.bad_input`)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from kernel_harness.records.bad_input import BadInput


def bad_inputs() -> list[BadInput]:
    """Its invalid configurations, each with the message a clear error matches."""
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as sk
    from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as ml

    def x(heads: int, n: int, d: int = 128) -> jax.Array:
        return jnp.ones((heads, n, d), jnp.float32)

    def blocks(**kw: int) -> Any:
        base = dict(block_q=128, block_kv=128, block_kv_compute=128, block_q_dkv=128,
                    block_kv_dkv=128, block_kv_dkv_compute=128, block_q_dq=128, block_kv_dq=128)
        return sk.BlockSizes(**{**base, **kw})

    def kernel(n: int, heads: int = 1, **kw: Any) -> Any:
        mask = ml.MultiHeadMask([ml.CausalMask((n, n))] * heads)
        return sk.make_splash_mha(mask, block_sizes=kw.pop("block_sizes", blocks()),
                                  head_shards=1, q_seq_shards=1, interpret=True, **kw)

    ids = lambda n: jnp.zeros((n,), jnp.int32)  # noqa: E731
    return [
        BadInput("block_q does not divide q_len",
                 lambda: kernel(512, block_sizes=blocks(block_q=384))(x(1, 512), x(1, 512),
                                                                       x(1, 512)),
                 r"block_size=384 should divide q_seq_len=512"),
        BadInput("block_kv_compute does not divide block_kv",
                 lambda: kernel(768, block_sizes=blocks(block_kv=384, block_kv_compute=256))(
                     x(1, 768), x(1, 768), x(1, 768)),
                 r"multiple of bkv_compute"),
        BadInput("q segment ids of the wrong length",
                 lambda: kernel(256)(x(1, 256), x(1, 256), x(1, 256),
                                     segment_ids=sk.SegmentIds(q=ids(128), kv=ids(256))),
                 r"shape for q segment_ids"),
        BadInput("kv segment ids of the wrong length",
                 lambda: kernel(256)(x(1, 256), x(1, 256), x(1, 256),
                                     segment_ids=sk.SegmentIds(q=ids(256), kv=ids(384))),
                 r"shape for kv segment_ids"),
        BadInput("q heads not a multiple of kv heads",
                 lambda: kernel(256, heads=3)(x(3, 256), x(2, 256), x(2, 256)),
                 r"multiple of the number of 'query' heads"),
        BadInput("k head_dim differs from q's",
                 lambda: kernel(256)(x(1, 256), x(1, 256, 64), x(1, 256)),
                 r"head dimension"),
        BadInput("mask shape differs from (q_len, kv_len)",
                 lambda: kernel(256)(x(1, 512), x(1, 512), x(1, 512)),
                 r"mask.*shape|shape.*mask", status="unclear",
                 finding="a TypeError from broadcast_in_dim inside the kernel wrapper, "
                 "not a message naming the mask"),
        BadInput("mask has more heads than q",
                 lambda: kernel(256, heads=2)(x(1, 256), x(1, 256), x(1, 256)),
                 r"heads", status="silent",
                 finding="a 2-head MultiHeadMask with 1-head q/k/v runs, using the first "
                 "head's mask"),
        BadInput("local window with a negative side",
                 lambda: ml.LocalMask((256, 256), window_size=(-5, 0), offset=0)[0:256, 0:256],
                 r"window", status="silent",
                 finding="LocalMask accepts window_size=(-5, 0) (a window excluding the "
                 "diagonal) without complaint"),
    ]
