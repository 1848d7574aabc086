"""The deltanet-tpu-gdn2 family: deltanet-tpu's chunk_gdn2 in precision="fp32"."""
