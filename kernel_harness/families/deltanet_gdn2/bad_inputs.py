"""Invalid configurations of deltanet-tpu's ``chunk_gdn2`` and the errors it gives
(``kernel-harness bad-input deltanet-tpu-gdn2``). Each is refused by the entry point's own
checks before any kernel runs. Not here: segment ids that are not sorted (the library's
contract: every change of id starts a document, so reused ids are new documents)."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from kernel_harness.families.deltanet_gdn2 import kernel as _kernel
from kernel_harness.records.bad_input import BadInput


def bad_inputs() -> list[BadInput]:
    """Its invalid configurations, each with the message a clear error matches."""
    gdn2 = _kernel.gdn2

    def arr(*shape: int) -> Any:
        return jnp.zeros(shape, jnp.float32)

    def run(**changes: Any) -> Any:
        args = {"q": arr(1, 8, 1, 128), "k": arr(1, 8, 1, 128), "v": arr(1, 8, 1, 128),
                "g": arr(1, 8, 1, 128) - 0.1, "b": arr(1, 8, 1, 128),
                "w": arr(1, 8, 1, 128)}
        options = {"chunk_size": 128, "precision": "fp32", "output_final_state": True}
        for name, value in changes.items():
            (args if name in args else options)[name] = value
        return gdn2.chunk_gdn2(*(args[n] for n in "q k v g b w".split()), **options)

    return [
        BadInput("a chunk size other than 128", lambda: run(chunk_size=64), r"chunk_size"),
        BadInput("an initial state of the wrong shape",
                 lambda: run(initial_state=arr(1, 1, 128, 64)), r"initial_state shape"),
        BadInput("segment ids of the wrong length",
                 lambda: run(segment_ids=jnp.zeros((1, 7), jnp.int32)), r"segment_ids"),
        BadInput("a decay gate of the wrong layout (64 channels for K = 128)",
                 lambda: run(g=arr(1, 8, 1, 64)), r"g last dimension"),
        BadInput("head dimension 64", lambda: run(q=arr(1, 8, 1, 64), k=arr(1, 8, 1, 64)),
                 r"head dimensions"),
        BadInput("an unknown precision", lambda: run(precision="tf32"), r"precision"),
    ]
