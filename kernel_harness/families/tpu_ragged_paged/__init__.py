"""tpu-ragged-paged: the TPU Pallas ragged paged attention (mixed prefill and decode)."""
