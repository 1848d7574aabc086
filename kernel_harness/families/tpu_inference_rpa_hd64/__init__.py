"""The tpu-inference-rpa-v3-hd64 family: tpu-inference's ragged paged attention v3 variant
for head_dim 64 (K and V of a head side by side in one 128-lane cache row, attention
sinks)."""
