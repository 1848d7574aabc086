"""The deltanet-tpu-gdn2-bf16 family: deltanet-tpu's chunk_gdn2 in its default precision="bf16"."""
