"""megablox-gmm: the TPU Pallas grouped matmul (gmm, and tgmm through its custom VJP)."""
