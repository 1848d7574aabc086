"""The flywheel-tpu-kda family: flywheel-tpu 0.3.0's fused conv1d + KDA serving kernel."""
