#!/usr/bin/env python3
"""ejkernel's XLA flash_attention: the bias gradient is silently 0.

Its custom VJP (ejkernel/kernels/_xla/flash_attention/_interface.py, ``_bwd``) returns
None for the bias cotangent, so jax treats d(loss)/d(bias) as zero. Checked against an
independent float64 NumPy computation of the same attention and its gradients.

Needs jax, numpy and ejkernel (not kernel_harness). Exit 0: out, dq, dk, dv and dbias
all within tolerance of float64; 1: an output is outside it (the bug: dbias).
"""
import os
import platform
import sys
from importlib.metadata import version

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax
import jax.numpy as jnp
import numpy as np

from ejkernel.kernels._xla.flash_attention import flash_attention

TOL = {"float32": 1e-4, "bfloat16": 2e-2}  # max |kernel - f64| / max |f64|


def reference(q, k, v, bias, g, scale):
    """float64 attention and its vjp; layout [batch, seq, heads, dim], bias [b, h, q, k]."""
    q, k, v, bias, g = (np.asarray(x, np.float64) for x in (q, k, v, bias, g))
    s = np.einsum("bqhd,bkhd->bhqk", q, k) * scale + bias
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    out = np.einsum("bhqk,bkhd->bqhd", p, v)
    dv = np.einsum("bhqk,bqhd->bkhd", p, g)
    dp = np.einsum("bqhd,bkhd->bhqk", g, v)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))  # d loss / d logits = d loss / d bias
    dq = np.einsum("bhqk,bkhd->bqhd", ds, k) * scale
    dk = np.einsum("bhqk,bqhd->bkhd", ds, q) * scale
    return {"out": out, "dq": dq, "dk": dk, "dv": dv, "dbias": ds}


def main() -> int:
    print(f"python {platform.python_version()}  jax {jax.__version__}  jaxlib "
          f"{version('jaxlib')}  numpy {np.__version__}  ejkernel {version('ejkernel')}  "
          f"backend {jax.default_backend()}")
    rng = np.random.default_rng(0)
    b, n, h, d = 2, 128, 2, 64
    scale = d ** -0.5
    failed = False
    for dtype in ("float32", "bfloat16"):
        q, k, v, g = (rng.standard_normal((b, n, h, d)).astype(np.float32) for _ in range(4))
        bias = rng.standard_normal((b, h, n, n)).astype(np.float32)
        args = [jnp.asarray(x, dtype) for x in (q, k, v, bias)]

        def f(q_, k_, v_, bias_):
            return flash_attention(q_, k_, v_, bias=bias_, softmax_scale=scale)

        out, vjp = jax.vjp(f, *args)
        dq, dk, dv, dbias = vjp(jnp.asarray(g, dtype))
        # The reference sees the same (rounded) inputs as the kernel.
        ref = reference(*(np.asarray(a, np.float32) for a in args),
                        np.asarray(jnp.asarray(g, dtype), np.float32), scale)
        got = {"out": out, "dq": dq, "dk": dk, "dv": dv, "dbias": dbias}
        print(f"{dtype:<9} dbias is exactly 0 everywhere: {not np.any(np.asarray(dbias))}")
        for name, value in got.items():
            value = np.asarray(value, np.float64)
            scale_ = np.abs(ref[name]).max()
            err = np.abs(value - ref[name]).max() / scale_
            i = np.unravel_index(np.argmax(np.abs(value - ref[name])), value.shape)
            bad = not err <= TOL[dtype]
            failed |= bad
            print(f"{dtype:<9} {'FAIL' if bad else 'ok  '} {name:<6} max rel err {err:.3g} "
                  f"(tol {TOL[dtype]:g})  worst at {tuple(int(x) for x in i)}: "
                  f"{value[i]:.6g} vs {ref[name][i]:.6g}  max |ref| {scale_:.3g}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
