#!/usr/bin/env python3
"""splash: a mask whose shape differs from (q_len, kv_len) gives an unclear error
(hand-written, not an export).

A 256x256 CausalMask with q, k, v of length 512. Expected: an error naming the mask and
both shapes. Exit 1 while the error does not mention the mask (or nothing is raised);
0 once it does. Needs only jax and numpy; runs splash in interpret mode on the CPU.
"""
import os
import platform
import re
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as sk
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as ml

print(f"python {platform.python_version()}  jax {jax.__version__}  numpy {np.__version__}")
blocks = sk.BlockSizes(block_q=128, block_kv=128, block_kv_compute=128, block_q_dkv=128,
                       block_kv_dkv=128, block_kv_dkv_compute=128, block_q_dq=128,
                       block_kv_dq=128)
kernel = sk.make_splash_mha(ml.MultiHeadMask([ml.CausalMask((256, 256))]), block_sizes=blocks,
                            head_shards=1, q_seq_shards=1, interpret=True)
q = k = v = jnp.ones((1, 512, 128), jnp.float32)  # [heads, length, head_dim], length 512
try:
    jax.block_until_ready(kernel(q, k, v))
except Exception as e:  # noqa: BLE001 - the exception is what is checked
    message = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
    if re.search(r"mask", message, re.IGNORECASE):
        print(f"ok: the error names the mask: {message}")
        sys.exit(0)
    print(f"FAIL: mask (256, 256) vs q/kv length 512 raised an error that does not name the "
          f"mask: {message}")
    sys.exit(1)
print("FAIL: mask (256, 256) vs q/kv length 512 ran without an error")
sys.exit(1)
