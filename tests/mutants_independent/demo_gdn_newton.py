"""ind-gdn-no-newton-refine: error of the chunk's triangular inverse T = (I + A)^-1 with and
without the library's Newton-Schulz step, against float64, on an A built as the prepass
builds it (l2-normalised k, b in [0, 1], ordinary/weak decay, one 128-token chunk)."""
import jax
import jax.numpy as jnp
import numpy as np
from deltanet_tpu.gdn2 import _invert_unit_triangular_core as inv

jax.config.update("jax_platforms", "cpu")
C, K = 128, 128
for decay, gscale in (("weak", 0.01), ("ordinary", 0.1)):
    rng = np.random.default_rng(1)
    k = rng.standard_normal((C, K)); k /= np.linalg.norm(k, axis=1, keepdims=True)
    b = rng.uniform(0, 1, (C, K))
    g = -rng.uniform(0, gscale, (C, K))
    lam = np.cumsum(g, axis=0)
    A = np.einsum("ik,jk,ijk->ij", b * k, k, np.exp(np.minimum(lam[:, None] - lam[None], 0)))
    A = np.tril(A, -1)
    exact = np.linalg.inv(np.eye(C) + A)
    A32 = jnp.asarray(A, jnp.float32)
    T_ref = np.asarray(inv(A32), np.float64)
    # the same function without its last (refinement) step
    src_T = None
    import inspect
    import textwrap
    s = textwrap.dedent(inspect.getsource(inv)).replace(
        "    return jnp.matmul(T, err, precision=precision)", "    return T")
    ns = {}
    exec(s, vars(__import__("deltanet_tpu.gdn2", fromlist=["x"])) | ns, ns)
    T_mut = np.asarray(ns["_invert_unit_triangular_core"](A32), np.float64)
    sc = np.abs(exact).max()
    print(f"{decay:9s} |T| max {sc:.3g}  max err/scale: refined {np.abs(T_ref - exact).max() / sc:.2e}"
          f"  unrefined {np.abs(T_mut - exact).max() / sc:.2e}")

# Correlated keys (all tokens share one key direction plus noise), b near 1: A's entries near 1.
for noise in (0.0, 0.3):
    rng = np.random.default_rng(2)
    base = rng.standard_normal(K)
    k = base + noise * rng.standard_normal((C, K)); k /= np.linalg.norm(k, axis=1, keepdims=True)
    b = rng.uniform(0.9, 1, (C, K))
    A = np.tril((b * k) @ k.T, -1)
    exact = np.linalg.inv(np.eye(C) + A)
    A32 = jnp.asarray(A, jnp.float32)
    T_ref = np.asarray(inv(A32), np.float64)
    T_mut = np.asarray(ns["_invert_unit_triangular_core"](A32), np.float64)
    sc = np.abs(exact).max()
    print(f"correlated noise={noise}: |T| max {sc:.3g}  max err/scale: refined "
          f"{np.abs(T_ref - exact).max() / sc:.2e}  unrefined {np.abs(T_mut - exact).max() / sc:.2e}")
