"""The tpu-inference-mla-v2 family: tpu-inference's multi-head latent attention (MLA) v2 kernel."""
