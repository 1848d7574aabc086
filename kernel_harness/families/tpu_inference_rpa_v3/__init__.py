"""The tpu-inference-rpa-v3 family: tpu-inference's ragged paged attention v3 kernel."""
