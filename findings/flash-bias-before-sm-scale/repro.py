#!/usr/bin/env python3
"""TPU flash attention: the bias enters BEFORE sm_scale (a contract difference, not a bug;
hand-written, not an export).

flash_attention(q, k, v, ab, sm_scale=s) computes softmax((q k^T + ab) * s) v, where
jax.nn.dot_product_attention and most attention APIs compute softmax(q k^T * s + ab) v.
Exit 1 while flash matches the bias-before-scale form (the difference holds), 0 if it
matches the usual form, 2 if it matches neither. Runs under TPU interpret mode on the CPU.
"""
import os
import platform
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.pallas import tpu as pltpu
from jax.experimental.pallas.ops.tpu import flash_attention as fa

print(f"python {platform.python_version()}  jax {jax.__version__}  numpy {np.__version__}")
rng = np.random.default_rng(0)
q, k, v = (jnp.asarray(rng.standard_normal((1, 1, n, 32)), jnp.float32) for n in (128, 256, 256))
ab = jnp.asarray(4 * rng.standard_normal((1, 1, 128, 256)), jnp.float32)
scale = 0.25
blocks = fa.BlockSizes(block_q=128, block_k_major=256, block_k=256, block_b=1,
                       block_q_major_dkv=128, block_k_major_dkv=256, block_k_dkv=256,
                       block_q_dkv=128, block_k_major_dq=256, block_k_dq=256, block_q_dq=128)
with pltpu.force_tpu_interpret_mode(pltpu.InterpretParams()):
    out = jax.jit(lambda q, k, v, ab: fa.flash_attention(
        q, k, v, ab, sm_scale=scale, block_sizes=blocks))(q, k, v, ab)
out = np.asarray(out, np.float64)[0, 0]


def attend(logits):
    p = np.exp(logits - logits.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ np.asarray(v, np.float64)[0, 0]


qk = np.einsum("qd,kd->qk", np.asarray(q, np.float64)[0, 0], np.asarray(k, np.float64)[0, 0])
bias = np.asarray(ab, np.float64)[0, 0]
before = np.abs(out - attend((qk + bias) * scale)).max()
usual = np.abs(out - attend(qk * scale + bias)).max()
print(f"max |flash - softmax((qk + ab) * s) v| = {before:.3g}")
print(f"max |flash - softmax(qk * s + ab) v|   = {usual:.3g}")
if before < 1e-4:
    print("flash adds the bias before sm_scale (differs from the usual form)")
    sys.exit(1)
if usual < 1e-4:
    print("flash now adds the bias after sm_scale (the usual form)")
    sys.exit(0)
print("flash matches neither form")
sys.exit(2)
