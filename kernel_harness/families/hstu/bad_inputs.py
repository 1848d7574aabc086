"""hstu's invalid configurations (``kernel-harness bad-input hstu``; see
:mod:`kernel_harness.records.bad_input`)."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from kernel_harness.records.bad_input import BadInput


def bad_inputs() -> list[BadInput]:
    """Its invalid configurations, each with the message a clear error matches."""
    from kernel_harness.kernels.hstu.api import hstu_attention

    def call(n: int = 256, mask: Any = "causal", **kw: Any) -> Any:
        x = jnp.ones((1, n, 1, 64), jnp.float32)
        return hstu_attention(mask, x, x, x, interpret=True, **kw)

    ids = lambda n: jnp.zeros((1, n), jnp.int32)  # noqa: E731
    return [
        BadInput("block_q not a multiple of 128", lambda: call(block_q=100), r"128-lane rule"),
        BadInput("block_q does not divide q_len", lambda: call(512, block_q=384),
                 r"block_q=384 does not divide q_len=512"),
        BadInput("compute block does not divide its block",
                 lambda: call(768, block_q=384, block_kv=384, block_kv_compute=256),
                 r"block_kv_compute=256"),
        BadInput("q segment ids of the wrong shape",
                 lambda: call(q_segment_ids=ids(128), kv_segment_ids=ids(256)),
                 r"q_segment_ids must have shape"),
        BadInput("only q segment ids", lambda: call(q_segment_ids=ids(256)),
                 r"both q_segment_ids and kv_segment_ids"),
        BadInput("numpy mask of the wrong shape",
                 lambda: call(mask=np.ones((128, 256), bool)), r"mask shape .* does not match"),
        BadInput("negative window", lambda: call(sliding_window_size=-1),
                 r"sliding_window_size must be >= 0"),
        BadInput("unknown mask type", lambda: call(mask="diagonal"), r"mask_type must be"),
    ]
