"""tpu-inference fused expert-parallel MoE (issue 38)."""
