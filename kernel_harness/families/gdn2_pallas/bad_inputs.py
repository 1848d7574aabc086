"""Invalid configurations of gdn2-pallas's ``gdn2_pallas_forward_trainable`` and the errors
it gives (``kernel-harness bad-input gdn2-pallas``), each refused by the library's own
checks (``KernelConfig``, ``validate_inputs``) before any kernel runs."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from kernel_harness.families.gdn2_pallas import kernel as _kernel
from kernel_harness.records.bad_input import BadInput


def bad_inputs() -> list[BadInput]:
    """Its invalid configurations, each with the message a clear error matches."""
    lib = _kernel.library()

    def arr(*shape: int) -> Any:
        return jnp.zeros(shape, jnp.float32)

    def config(**changes: Any) -> Any:
        return lib.KernelConfig(**{"bt": 64, "bc": 32, "mb": 16, "clip": _kernel.CLIP,
                                   "wy_eps": 0.0, **changes})

    def run(config_changes: dict | None = None, **changes: Any) -> Any:
        args = {n: arr(1, 64, 1, 128) for n in ("q", "k", "v", "w", "b", "g")}
        args.update(h0=None, scale=128 ** -0.5)
        args.update(changes)
        return lib.gdn2_pallas_forward_trainable(
            *(args[n] for n in ("q", "k", "v", "w", "b", "g", "scale")), h0=args["h0"],
            config=config(**(config_changes or {})))

    return [
        BadInput("a sequence that is not a whole number of chunks",
                 lambda: run(**{n: arr(1, 96, 1, 128) for n in "q k v w b g".split()}),
                 r"seq_len=96 must be divisible by config\.bt=64"),
        BadInput("head dimension 64", lambda: run(**{n: arr(1, 64, 1, 64)
                                                      for n in "q k v w b g".split()}),
                 r"d_head=128"),
        BadInput("an initial state of the wrong shape", lambda: run(h0=arr(1, 1, 128, 64)),
                 r"h0\.shape"),
        BadInput("a decay gate of the wrong layout (one value per head)",
                 lambda: run(g=arr(1, 64, 1, 1)), r"g\.shape"),
        BadInput("bt other than 2 bc", lambda: run({"bc": 16}), r"must equal 2\*bc"),
        BadInput("mb not dividing bc", lambda: run({"mb": 24}), r"divisible by mb"),
        BadInput("wy_eps out of [0, 1)", lambda: run({"wy_eps": 1.0}), r"wy_eps"),
    ]
