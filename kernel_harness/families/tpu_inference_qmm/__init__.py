"""The tpu-inference-quantized-matmul family: tpu-inference's int8 quantized matmul kernel."""
