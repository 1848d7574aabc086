#!/usr/bin/env python3
"""splash: LocalMask accepts a negative window side (hand-written, not an export).

LocalMask((256, 256), window_size=(-5, 0)) asks query i to see keys j with
i + 5 <= j <= i: no key at all. It is built and indexed without complaint, and every row
of the dense mask is empty (splash leaves such rows undefined).
Exit 1 while the negative window is accepted; 0 once LocalMask raises ValueError for it.
Needs only jax and numpy.
"""
import platform
import sys

import jax
import numpy as np
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as ml

print(f"python {platform.python_version()}  jax {jax.__version__}  numpy {np.__version__}")
try:
    mask = ml.LocalMask((256, 256), window_size=(-5, 0), offset=0)
    dense = np.asarray(mask[0:256, 0:256])
except ValueError as e:
    print(f"ok: LocalMask rejects window_size=(-5, 0): {e}")
    sys.exit(0)
print(f"FAIL: LocalMask accepted window_size=(-5, 0); rows that see no key: "
      f"{int((~dense.any(axis=1)).sum())} of {dense.shape[0]}")
sys.exit(1)
