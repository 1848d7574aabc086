"""The flywheel-tpu-gdn family: flywheel-tpu 0.3.0's fused conv1d + Gated DeltaNet kernel."""
