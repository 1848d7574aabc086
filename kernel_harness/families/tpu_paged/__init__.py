"""tpu-paged: the TPU Pallas paged attention (one decode query per row over a paged KV cache)."""
