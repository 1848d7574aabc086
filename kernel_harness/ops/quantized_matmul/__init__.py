"""The quantized matmul op: ``out = x @ dequantize(w_q)^T`` with int8 per-channel weights,
the activations optionally quantized per token on the fly (:mod:`.cases`, the independent
reference in :mod:`.reference`, whose rounding of the activations is a declared contract
option)."""
