"""deltanet-tpu 0.3.0 chunk_gdn2: a document whose state overflows (raw, unnormalised keys:
outside the README's contract, which asks for qk_l2norm=True or normalised keys) makes the
OTHER document in the same chunk non-finite too, forward and gradients; the token-serial
recurrence keeps that document finite (documents are independent by definition).

Exit 1 while chunk_gdn2's first document (one token) is non-finite where the token-serial
reference's is finite; exit 0 otherwise. Needs: jax, numpy, deltanet-tpu 0.3.0.
"""

import os
import sys
import warnings

os.environ.setdefault("JAX_PLATFORMS", "cpu")
warnings.simplefilter("ignore")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from deltanet_tpu import chunk_gdn2  # noqa: E402

L = 256
rng = np.random.default_rng(0)
q, k, v = (jnp.asarray(rng.standard_normal((1, L, 1, 128)), jnp.float32) for _ in range(3))
g = jnp.asarray(-np.exp(rng.standard_normal((1, L, 1, 128)) * 0.39 - 1), jnp.float32)
b = jnp.asarray(rng.uniform(0, 1, (1, L, 1, 128)), jnp.float32)
w = jnp.asarray(rng.uniform(0, 1, (1, L, 1, 128)), jnp.float32)
# Two documents: token 0 alone, then tokens 1..255 (whose state overflows: |k| ~ 11).
segment_ids = jnp.asarray((np.arange(L) >= 1).astype(np.int32)[None])


def kernel(q, k, v, g, b, w):
    return chunk_gdn2(q, k, v, g, b, w, segment_ids=segment_ids, precision="fp32",
                      qk_l2norm=False)


def serial(q, k, v, g, b, w):
    """The README's recurrence token by token (float32), the state reset at token 1."""
    q = q[0, :, 0] / np.sqrt(128.0)
    k, v, g, b, w = (x[0, :, 0] for x in (k, v, g, b, w))

    def step(s, t):
        s = jnp.where(t == 1, 0.0, s)
        s = jnp.exp(g[t])[:, None] * s
        s = s + jnp.outer(k[t], w[t] * v[t] - s.T @ (b[t] * k[t]))
        return s, s.T @ q[t]

    _, out = jax.lax.scan(step, jnp.zeros((128, 128)), jnp.arange(L))
    return out


out, vjp = jax.vjp(kernel, q, k, v, g, b, w)
grads = vjp(jnp.ones_like(out))
ref = serial(q, k, v, g, b, w)
first_ref = bool(jnp.isfinite(ref[0]).all())
first_kernel = bool(jnp.isfinite(out[0, 0]).all())
first_grads = all(bool(jnp.isfinite(d[0, 0]).all()) for d in grads)
print(f"jax {jax.__version__} backend {jax.default_backend()}")
print(f"token-serial: document 0 finite {first_ref}; document 1 overflows from token "
      f"{int(np.argmax(~np.isfinite(np.asarray(ref)).any(-1)))}")
print(f"chunk_gdn2:   document 0 out finite {first_kernel}, its gradients finite {first_grads}")
holds = first_ref and not (first_kernel and first_grads)
print("finding holds" if holds else "finding does not hold")
sys.exit(1 if holds else 0)
