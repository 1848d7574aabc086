"""The tpu-all-gather family: jax's Pallas TPU all-gather on a simulated mesh."""
