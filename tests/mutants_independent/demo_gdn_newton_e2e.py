"""ind-gdn-no-newton-refine end to end: chunk_gdn2 (fp32, Pallas interpret) correct vs mutated,
on one 128-token chunk with correlated keys and b near 1 (not what the family draws: its keys
are i.i.d. normal). Prints the mutant's departure from the correct kernel, relative to scale."""
import warnings

import deltanet_tpu.gdn2 as good
import jax.numpy as jnp
import numpy as np

from kernel_harness.records.mutant import load_patched
from tests.mutants_independent.deltanet_tpu_gdn2_mutants import MUTANTS

warnings.simplefilter("ignore")
bad = load_patched(next(m for m in MUTANTS if m.name == "ind-gdn-no-newton-refine"))
B, L, H, D = 1, 128, 1, 128
for noise, blo in ((1.0e9, 0.0), (0.3, 0.9), (0.0, 0.9)):
    rng = np.random.default_rng(3)
    base = rng.standard_normal(D)
    k = (base + noise * rng.standard_normal((B, L, H, D))) if noise < 1e9 else rng.standard_normal((B, L, H, D))
    q = rng.standard_normal((B, L, H, D))
    v = rng.standard_normal((B, L, H, D))
    g = -rng.uniform(0.001, 0.01, (B, L, H, D))
    b = rng.uniform(blo, 1.0, (B, L, H, D))
    w = rng.uniform(0, 1, (B, L, H, D))
    args = [jnp.asarray(a, jnp.float32) for a in (q, k, v, g, b, w)]
    kw = dict(segment_ids=jnp.zeros((B, L), jnp.int32), output_final_state=True,
              chunk_size=128, precision="fp32", qk_l2norm=True)
    o1, s1 = good.chunk_gdn2(*args, **kw)
    o2, s2 = bad.chunk_gdn2(*args, **kw)
    label = "iid keys (as drawn)" if noise >= 1e9 else f"correlated keys noise={noise}, b>={blo}"
    print(f"{label:38s} out: {float(jnp.abs(o1 - o2).max() / jnp.abs(o1).max()):.2e}  "
          f"final_state: {float(jnp.abs(s1 - s2).max() / jnp.abs(s1).max()):.2e}  (family tol 2e-5)")
