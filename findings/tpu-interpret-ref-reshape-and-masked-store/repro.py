"""jax's TPU interpreter cannot run ragged_paged_attention: two interpreter bugs.

1. A load through ``ref.reshape(...)`` (ragged_paged_attention's K/V buffer) dies in the
   interpreter's ``get``: ``to_range`` assumes every transform is an NDIndexer
   (AttributeError: 'ReshapeTransform' object has no attribute 'indices').
2. A valid masked store into a (4, 2, 8) slice of a (4, 4, 8) ref is rejected as
   "Out-of-bounds masked swap": ``swap_buffer_content`` marks out-of-bounds rows with
   ``in_bounds_mask[in_bounds_shape[i]:] = False`` for every axis i (always axis 0).

Exit 1 while either bug holds, 0 when both are fixed, 2 on anything else.
Needs only jax and numpy; CPU.
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

PARAMS = pltpu.InterpretParams(detect_races=False, uninitialized_memory="zero")


def reshaped_read():
    x = np.arange(64, dtype=np.float32).reshape(4, 2, 8)

    def body(x_ref, o_ref):
        o_ref[...] = x_ref.reshape(8, 8)[1::2, :]

    with pltpu.force_tpu_interpret_mode(PARAMS):
        out = pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct((4, 8), jnp.float32))(x)
        return np.array_equal(np.asarray(out), x.reshape(8, 8)[1::2])


def masked_store_3d():
    x = np.arange(64, dtype=np.float32).reshape(4, 2, 8) + 1

    def body(x_ref, o_ref):
        o_ref[...] = jnp.zeros(o_ref.shape, o_ref.dtype)
        rows = jax.lax.broadcasted_iota(jnp.int32, x_ref.shape, 0)
        pltpu.store(o_ref.at[:, 0:2, :], x_ref[...], mask=rows >= 2)

    want = np.zeros((4, 4, 8), np.float32)
    want[2:, 0:2] = x[2:]
    with pltpu.force_tpu_interpret_mode(PARAMS):
        out = pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct((4, 4, 8), jnp.float32))(x)
        return np.array_equal(np.asarray(out), want)


def main() -> int:
    print(f"jax {jax.__version__}")
    held = []
    for name, check, signature in (("read through ref.reshape", reshaped_read,
                                    "ReshapeTransform"),
                                   ("masked store to a 3-D ref", masked_store_3d,
                                    "Out-of-bounds masked swap")):
        try:
            ok = check()
        except Exception as e:  # noqa: BLE001
            text = str(e)
            pltpu.reset_tpu_interpret_mode_state()
            if signature not in text:
                print(f"{name}: unexpected error {type(e).__name__}: {text[:300]}")
                return 2
            print(f"{name}: FAILS in the TPU interpreter ({signature})")
            held.append(name)
            continue
        print(f"{name}: {'runs correctly' if ok else 'WRONG VALUES'}")
        if not ok:
            return 2
    return 1 if held else 0


if __name__ == "__main__":
    sys.exit(main())
