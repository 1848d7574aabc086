"""The tpu-inference-blockwise-quantized-matmul family: tpu-inference's quantized matmul
with blockwise weight scales."""
