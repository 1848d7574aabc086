#!/usr/bin/env python3
"""ejkernel's Pallas TPU flash_attention calls ``pltpu.repeat``, which jax 0.10.2 (the
version ejkernel 0.0.80.3 pins, ``jax~=0.10.0``) no longer exports.

Tracing is enough to see it (no TPU needed): ``jax.eval_shape`` of the forward with
segment ids, and of the forward + backward of a case with several kv blocks, both reach
``pltpu.repeat`` in the kernel body and raise AttributeError.

Needs jax, numpy and ejkernel (not kernel_harness). Exit 0: every case traces; 1: a case
raises AttributeError naming ``repeat`` (the bug); any other exception propagates.
``--with-alias`` first restores ``pltpu.repeat`` (tiling, as older jax exported it): then
every case traces (the control: the missing name is what fails).
"""
import os
import platform
import sys
from importlib.metadata import version

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.pallas import tpu as pltpu

from ejkernel.kernels._pallas.tpu.flash_attention import flash_attention


def case(n: int, segments: bool, backward: bool):
    b, h, d = 1, 2, 128
    q = k = v = jax.ShapeDtypeStruct((b, n, h, d), jnp.float32)
    seg = jax.ShapeDtypeStruct((b, n), jnp.int32)

    def fwd(q_, k_, v_, seg_):
        kw = {"q_segment_ids": seg_, "kv_segment_ids": seg_} if segments else {}
        return flash_attention(q_, k_, v_, **kw)

    def fwd_bwd(q_, k_, v_, seg_):
        out, vjp = jax.vjp(lambda a, b_, c: fwd(a, b_, c, seg_), q_, k_, v_)
        return vjp(jnp.ones_like(out))

    return jax.eval_shape(fwd_bwd if backward else fwd, q, k, v, seg)


def main() -> int:
    if "--with-alias" in sys.argv:  # the control: pltpu.repeat as older jax had it (tiling)
        pltpu.repeat = lambda x, repeats, axis: jnp.concatenate([x] * repeats, axis=axis)
    print(f"python {platform.python_version()}  jax {jax.__version__}  jaxlib "
          f"{version('jaxlib')}  numpy {np.__version__}  ejkernel {version('ejkernel')}  "
          f"pltpu has 'repeat': {hasattr(pltpu, 'repeat')}")
    failed = False
    for name, n, segments, backward in [
        ("forward, 1 kv block, no segment ids", 128, False, False),
        ("forward, segment ids", 256, True, False),
        ("forward + backward, 8 kv blocks (length 1024)", 1024, False, True),
    ]:
        try:
            case(n, segments, backward)
        except AttributeError as e:
            if "repeat" not in str(e):
                raise
            failed = True
            print(f"FAIL {name}: AttributeError: {e}")
            continue
        print(f"ok   {name}: traces")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
