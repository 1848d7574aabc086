"""The tpu-inference-all-gather-matmul family: tpu-inference's collective matmul."""
