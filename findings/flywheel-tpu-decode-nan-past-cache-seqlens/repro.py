#!/usr/bin/env python3
"""flywheel-tpu 0.3.0 flash_attn_with_kvcache, single-token decode: NaN in V rows past
cache_seqlens turns every output NaN.

Needs only jax, numpy and flywheel-tpu (Python >= 3.12). Runs the kernel in its own
interpret mode on the CPU. One row, one KV head, one 128-token page, cache_seqlens 5:
tokens 0..4 hold finite K and V, the slots past token 4 hold K = 0 and V = NaN (memory
the call must not read: a freshly allocated or recycled page). The same cache is run
four ways: paged decode with NaN V (the bug), paged decode with NaN K past the length
(harmless), the contiguous pair with NaN V (the bug again), and the varlen (paged
multi-token) kernel on the same paged cache with NaN V (right).

Exit 0: every output finite and within 2e-2 of the float32 reference; 1: the decode
output with NaN V past cache_seqlens is NaN or off (the bug is there); 2: a control
(NaN K, varlen) is off, so the repro itself is wrong.
"""
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax
import jax.numpy as jnp
import numpy as np
from flywheel_tpu.flash_attn_interface import flash_attn_with_kvcache

PAGE, D, LEN = 128, 128, 5


def reference(q, k, v):
    """float32 softmax attention of one query over the first LEN tokens."""
    s = (q[0, 0, 0] @ k[:LEN].T) / np.sqrt(D)
    p = np.exp(s - s.max())
    return (p / p.sum()) @ v[:LEN]


def error(out, want):
    """max |out - want| / max |want| (inf where out is not finite)."""
    out = np.asarray(out, np.float32).reshape(-1)
    if not np.isfinite(out).all():
        return float("inf")
    return float(np.abs(out - want).max() / np.abs(want).max())


def main() -> int:
    rng = np.random.default_rng(0)
    bf = lambda x: np.array(jnp.asarray(x, jnp.bfloat16).astype(jnp.float32))  # noqa: E731
    q = bf(rng.standard_normal((1, 1, 1, D)))
    k, v = bf(rng.standard_normal((PAGE, D))), bf(rng.standard_normal((PAGE, D)))
    k[LEN:], v[LEN:] = 0.0, 0.0
    want = reference(q, k, v)
    seqlens = jnp.asarray([LEN], jnp.int32)
    table = jnp.asarray([[0]], jnp.int32)
    qb = jnp.asarray(q, jnp.bfloat16)

    def poisoned(name):
        kk, vv = k.copy(), v.copy()
        (vv if name == "v" else kk)[LEN:] = np.nan
        return kk, vv

    def paged(name, seqlen_q=1):
        kk, vv = poisoned(name)
        merged = jnp.asarray(np.stack([kk, vv], axis=1)[None], jnp.bfloat16)  # [k0, v0]
        qq = jnp.broadcast_to(qb, (1, seqlen_q, 1, D))
        out, _ = flash_attn_with_kvcache(qq, merged, None, cache_seqlens=seqlens,
                                         block_table=table, causal=True, interpret=True)
        return np.asarray(out, np.float32)[:, -1:]

    def contiguous(name):
        kk, vv = poisoned(name)
        kc, vc = (jnp.asarray(x[None, :, None], jnp.bfloat16) for x in (kk, vv))
        out, _, _ = flash_attn_with_kvcache(qb, kc, vc, cache_seqlens=seqlens,
                                            interpret=True)
        return out

    results = {
        "paged decode, NaN V past cache_seqlens": error(paged("v"), want),
        "paged decode, NaN K past cache_seqlens": error(paged("k"), want),
        "contiguous decode, NaN V past cache_seqlens": error(contiguous("v"), want),
        # Two queries of one sequence take the varlen (multi-token) kernel; bottom-right
        # causal puts the last at position LEN - 1, the decode query's view.
        "varlen kernel (2 queries), NaN V past cache_seqlens": error(paged("v", 2), want),
    }
    for what, err in results.items():
        print(f"{what}: relative error {err:.3g}")
    print(f"jax {jax.__version__}")
    bug = [w for w, e in results.items() if e > 2e-2 and "NaN V" in w and "decode" in w]
    control = [w for w, e in results.items() if e > 2e-2 and w not in bug]
    if control:
        print(f"a control is off (the repro is wrong): {control}")
        return 2
    if bug:
        print("BUG: NaN in V rows past cache_seqlens reaches the decode output")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
